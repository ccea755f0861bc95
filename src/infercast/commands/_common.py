"""Small helpers shared by command modules: list parsing and JSON output."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from infercast.errors import ConfigError
from infercast.report.jsonsafe import json_safe as _clean


def _parse_list(text: str, flag: str, cast: type, kind: str) -> list:
    """Comma-separated positive values of ``cast``; a clear error naming the flag otherwise."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = cast(part)
        except ValueError:
            raise ConfigError(f"{flag} expects comma-separated {kind}, got {part!r}") from None
        if not value > 0 or not math.isfinite(value):
            raise ConfigError(f"{flag} values must be positive, got {part}")
        out.append(value)
    if not out:
        raise ConfigError(f"{flag} is empty: give at least one value, e.g. {flag} 1,8")
    return out


def parse_int_list(text: str, flag: str) -> list[int]:
    """'1,8,32' -> [1, 8, 32]."""
    return _parse_list(text, flag, int, "integers")


def parse_float_list(text: str, flag: str) -> list[float]:
    """'0.5,1,2' -> [0.5, 1.0, 2.0]."""
    return _parse_list(text, flag, float, "numbers")


def print_json(data: Any) -> None:
    """One JSON object on stdout; a result object carries ``"meta"`` (command, inputs, version,
    date)."""
    from infercast.commands._meta import with_meta

    sys.stdout.write(json.dumps(_clean(with_meta(data)), indent=2, default=str) + "\n")


def renamed(new: Any, old: Any, new_flag: str, old_flag: str, scale: float = 1.0) -> Any:
    """The value of a renamed flag: the new name's, or the old (hidden) name's times ``scale``.

    Old names stay accepted for one release (``infercast --help`` shows only the new
    ones); giving both with different values is an error naming the two.
    """
    if old is None:
        return new
    value = old * scale if scale != 1.0 else old
    if new is not None and new != value:
        raise ConfigError(
            f"{old_flag} is the old name of {new_flag} ({new_flag} {new} vs {old_flag} {old}): "
            f"give only {new_flag}"
        )
    return value
