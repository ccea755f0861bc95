"""One validation layer for every input: flags, config files, HF config.json, data files.

Each helper takes a value as it came in (a flag, a TOML/YAML/JSON value, a CSV
cell), the name the user knows it by (``--seed``, ``num_key_value_heads``,
``hardware.csv row 3: tflops``) and returns it as the right Python type or
raises :class:`~infercast.errors.ConfigError` with one line naming the field,
the value and the fix. The rules are the same everywhere:

- numbers are finite (NaN and infinity are refused) and in range;
- integers are integers: ``true`` is not 1, ``4.0`` is 4 only from a text
  file that has no integer type, ``4.5`` and ``"4"`` are refused where a typed
  format (JSON, TOML, YAML) gave them;
- strings are strings, and an empty string is an error, never "not given".

This module sits below ``specs``: it imports nothing from infercast but the
error classes, so every loader and command can use it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from infercast.errors import ConfigError

# Seeds go to numpy's default_rng, which takes non-negative integers; 2**64 - 1 keeps
# them in the unsigned 64-bit range every seed-taking tool (OpenAI's int64 too) accepts.
SEED_MAX = 2**64 - 1


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(field: str, value: Any, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"{field} = {_show(value)}: {problem}; {fix}")


def _range_text(lo: float | None, hi: float | None, lo_open: bool) -> str:
    if lo is not None and hi is not None:
        return (
            f"use a value {'above' if lo_open else 'from'} {lo:g} {'' if lo_open else ''}"
            f"up to {hi:g}".replace("  ", " ")
        )
    if lo is not None:
        return f"use a value {'above' if lo_open else 'of at least'} {lo:g}"
    if hi is not None:
        return f"use a value of at most {hi:g}"
    return "use a finite number"


def check_number(
    value: Any,
    field: str,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    fix: str | None = None,
) -> float:
    """A finite real number in [lo, hi] (``lo_open``: strictly above lo); bools refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(
            field,
            value,
            f"expected a number, got {type(value).__name__}",
            fix or _range_text(lo, hi, lo_open),
        )
    number = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
    if not math.isfinite(number):
        raise _fail(field, value, "not a finite number", fix or _range_text(lo, hi, lo_open))
    low_bad = lo is not None and (number <= lo if lo_open else number < lo)
    if low_bad or (hi is not None and number > hi):
        raise _fail(field, value, "out of range", fix or _range_text(lo, hi, lo_open))
    return number


def check_int(
    value: Any,
    field: str,
    lo: int | None = None,
    hi: int | None = None,
    fix: str | None = None,
    whole_floats: bool = False,
) -> int:
    """An integer in [lo, hi]; bools refused; ``whole_floats`` also takes 4.0 (untyped files)."""
    if isinstance(value, float) and whole_floats and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(
            field,
            value,
            f"expected an integer, got {type(value).__name__}",
            fix or _range_text(lo, hi, False),
        )
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise _fail(field, value, "out of range", fix or _range_text(lo, hi, False))
    return value


def _check_type(value: Any, field: str, kind: type, expected: str, fix: str) -> Any:
    """``value`` when it is a ``kind``; else the error "expected <expected>, got <its type>"."""
    if not isinstance(value, kind):
        raise _fail(field, value, f"expected {expected}, got {type(value).__name__}", fix)
    return value


def check_str(value: Any, field: str, fix: str = "give a non-empty string") -> str:
    """A non-empty string (whitespace alone counts as empty)."""
    _check_type(value, field, str, "a string", fix)
    if not value.strip():
        raise _fail(field, value, "empty (an empty string is not 'not given')", fix)
    return value


def check_bool(value: Any, field: str) -> bool:
    """A real boolean (true/false), not 0/1 or "yes"."""
    return _check_type(value, field, bool, "true or false", "write true or false")


def check_seed(value: Any, field: str = "`seed`") -> int:
    """A random seed: an integer in [0, 2**64 - 1]."""
    return check_int(value, field, 0, SEED_MAX, fix="use a seed from 0 to 2**64 - 1")


def check_port(value: Any, field: str = "`port`") -> int:
    """A TCP port, 1-65535."""
    return check_int(value, field, 1, 65535, fix="use a TCP port from 1 to 65535")


def check_mapping(value: Any, field: str) -> dict:
    """A JSON/TOML/YAML object (a table), not a list, string or number."""
    return _check_type(
        value,
        field,
        dict,
        "an object of fields",
        "write a JSON object / TOML table of name = value fields",
    )


def _nearest_existing(path: Path) -> Path:
    for parent in path.parents:
        if parent.exists():
            return parent
    return Path(".")


def check_writable_dir(path: str | os.PathLike | None, flag: str) -> Path | None:
    """An output folder (made later if missing): it, or its nearest existing parent, is writable."""
    if path is None:
        return None
    text = os.fspath(path)
    if not text.strip():
        raise _fail(flag, text, "empty path", "give a folder name")
    out = Path(text).expanduser()
    if out.exists() and not out.is_dir():
        raise _fail(flag, text, "is a file, not a folder", "give a folder name")
    # Try it (os.access says yes to root everywhere, /proc included): make the folder now,
    # as the command would later, and write a probe file in it.
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".infercast-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise _fail(
            flag, text, f"cannot be written ({exc.strerror})", "choose another folder"
        ) from None
    return out


# The image formats matplotlib's Agg backend writes (no suffix: PNG, its default).
PLOT_SUFFIXES = (
    ".png",
    ".pdf",
    ".svg",
    ".svgz",
    ".jpg",
    ".jpeg",
    ".tif",
    ".tiff",
    ".webp",
    ".eps",
    ".ps",
    ".pgf",
    ".raw",
    ".rgba",
    ".gif",
    ".avif",
)


def check_plot_path(path: str | os.PathLike | None, flag: str = "`plot`") -> Path | None:
    """An image path ``flag`` can write: a format matplotlib writes, in a writable folder."""
    if path is not None and Path(os.fspath(path)).suffix.lower() not in ("", *PLOT_SUFFIXES):
        raise _fail(
            flag,
            os.fspath(path),
            "is not an image format matplotlib writes",
            "end it in .png, .svg or .pdf",
        )
    return check_writable(path, flag)


def check_writable(
    path: str | os.PathLike | None, flag: str, make_parents: bool = False
) -> Path | None:
    """The output ``path`` of ``flag`` if it can be written, checked before any work starts.

    The folder must exist (``make_parents``: its nearest existing ancestor) and be
    writable, and the path must not be a folder; nothing is created here (a failed
    run leaves no empty file behind).
    """
    if path is None:
        return None
    text = os.fspath(path)
    if not text.strip():
        raise _fail(flag, text, "empty path", "give a file name")
    if text == "-":
        return Path(text)
    out = Path(text).expanduser()
    if out.is_dir():
        raise _fail(flag, text, "is a folder", "give a file name inside it")
    parent = out.parent if str(out.parent) else Path(".")
    if make_parents and not parent.exists():
        parent = _nearest_existing(out)
    if not parent.is_dir():
        raise _fail(flag, text, f"folder {str(parent)!r} does not exist", "create it first")
    # Try it (os.access says yes to root everywhere, /proc included); a new file is removed.
    existed = out.exists()
    try:
        with open(out, "a"):
            pass
    except OSError as exc:
        raise _fail(
            flag, text, f"cannot be written ({exc.strerror})", "choose another path"
        ) from None
    if not existed:
        out.unlink(missing_ok=True)
    return out


def read_text(path: str | os.PathLike, what: str) -> str:
    """A text file as UTF-8, or one line naming the file and the problem."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {os.fspath(path)!r} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {os.fspath(path)!r} is a folder; give a file") from None
    except OSError as exc:
        raise ConfigError(f"{what} {os.fspath(path)!r} cannot be read ({exc.strerror})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, what: str) -> Any:
    """JSON text, refusing NaN and Infinity (Python's json takes them; JSON does not)."""
    import json

    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}; write a finite number") from None
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply to be a config") from None
