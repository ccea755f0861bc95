"""Shipped presets: model configs, hardware table and prices, plus user files.

``load_model("llama-3.1-70b")`` reads ``data/models/llama-3.1-70b.json``; any path
to a ``config.json`` or a directory holding one works too. ``load_hardware``
accepts a key of ``data/hardware.csv`` or a TOML/JSON spec file. Unknown names
are errors that list the close matches; there is no silent fallback.
"""

from __future__ import annotations

import csv
import difflib
import statistics
import tomllib
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from infercast.errors import ConfigError, ModelConfigError, UnknownHardwareError, UnknownModelError
from infercast.specs.hardware import COMPUTE_DTYPES, HardwareSpec, hardware_from_mapping
from infercast.specs.hf_reader import model_from_hf_config
from infercast.specs.model import ModelSpec
from infercast.validation import parse_json, read_text

DATA = resources.files("infercast") / "data"


def data_path(*parts: str) -> Path:
    """Filesystem path of a shipped data file."""
    return Path(str(DATA.joinpath(*parts)))


# ---- models ---------------------------------------------------------------
def model_names() -> list[str]:
    """Names of the shipped model presets."""
    return sorted(p.stem for p in data_path("models").glob("*.json"))


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def read_toml(path: Path, what: str, hint: str = "") -> dict[str, Any]:
    """A TOML file as a dict; an unreadable or malformed file is one ConfigError line naming
    ``what`` it should be (``hint``: how to get a good one)."""
    try:
        return tomllib.loads(read_text(path, what))
    except ConfigError as exc:
        raise ConfigError(f"{exc}{hint}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML: {exc}") from None


def _read_json(path: Path, what: str) -> Any:
    """A JSON file as UTF-8 text, finite numbers only (ModelConfigError otherwise)."""
    try:
        return parse_json(read_text(path, what), f"{what} {path}")
    except ModelConfigError:
        raise
    except ConfigError as exc:
        raise ModelConfigError(str(exc)) from None


@lru_cache(maxsize=64)
def _load_preset_model(name: str) -> ModelSpec:
    return model_from_hf_config(
        _read_json(data_path("models", f"{name}.json"), "model preset"), name
    )


def load_model(name_or_path: str) -> ModelSpec:
    """A preset name, a path to a config.json, or a model directory holding one."""
    name = str(name_or_path).strip()
    if data_path("models", f"{name.lower()}.json").is_file():
        return _load_preset_model(name.lower())
    path = Path(name).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise UnknownModelError(f"model directory {name!r} has no config.json")
    if path.is_file():
        label = path.parent.name if path.name == "config.json" else path.stem
        return model_from_hf_config(_read_json(path, "model config"), label)
    names = model_names()
    raise UnknownModelError(
        f"unknown model {name!r}{_suggest(name.lower(), names)}: use a preset "
        f"(`infercast models` lists {len(names)}) or a path to a config.json"
    )


def published_sizes() -> dict[str, dict[str, str]]:
    """Rows of data/models/PUBLISHED_SIZES.csv keyed by model name."""
    with data_path("models", "PUBLISHED_SIZES.csv").open() as fh:
        return {row["model"]: row for row in csv.DictReader(fh)}


# ---- hardware ---------------------------------------------------------------
@lru_cache(maxsize=1)
def _hardware_rows() -> dict[str, dict[str, str]]:
    with data_path("hardware.csv").open() as fh:
        return {row["key"]: row for row in csv.DictReader(fh)}


def _resolved_row(key: str, rows: dict[str, dict[str, str]]) -> dict[str, str]:
    """A row whose empty fields are inherited from its ``variant_of`` parent."""
    row = dict(rows[key])
    parent = row.get("variant_of")
    if parent and parent in rows and parent != key:
        base = _resolved_row(parent, rows)
        for k, v in base.items():
            if row.get(k) in (None, "") and k not in ("variant_of", "notes"):
                row[k] = v
    return row


def _float(value: str | None) -> float:
    return float(value) if value not in (None, "") else 0.0


@lru_cache(maxsize=1)
def default_prices() -> dict[str, tuple[float, str]]:
    """$/GPU-hour per part: median of the on-demand quotes in data/prices.csv.

    A quoted range counts as its midpoint. Indicative only: pass --price for yours.
    """
    quotes: dict[str, list[float]] = {}
    with data_path("prices.csv").open() as fh:
        for row in csv.DictReader(fh):
            if row["pricing_model"] != "on-demand" or "/" in row["hardware"]:
                continue
            if row["usd_per_gpu_hour"]:
                value = float(row["usd_per_gpu_hour"])
            elif row["usd_per_gpu_hour_low"] and row["usd_per_gpu_hour_high"]:
                value = (
                    float(row["usd_per_gpu_hour_low"]) + float(row["usd_per_gpu_hour_high"])
                ) / 2
            else:
                continue
            quotes.setdefault(row["hardware"], []).append(value)
    return {
        k: (statistics.median(v), f"median of {len(v)} on-demand quote(s) in prices.csv")
        for k, v in quotes.items()
    }


@lru_cache(maxsize=1)
def visible_capacities() -> dict[str, tuple[float, str]]:
    """Device memory as CUDA reports it, where measured (data/hardware_capacity.csv).

    Datasheets round ("80GB" on an H100 is 80 GiB of HBM3); the memory plan needs
    what the runtime can allocate, so a measured figure wins over the datasheet.
    """
    with data_path("hardware_capacity.csv").open() as fh:
        return {
            r["key"]: (float(r["memory_bytes_visible"]), r["citation"]) for r in csv.DictReader(fh)
        }


def _visible_capacity(key: str, memory_bytes: float) -> tuple[float, str] | None:
    """The measured capacity of ``key``, or of the part it is a variant of when the datasheet
    memory is the same (a power-limited or higher-TGP board is the same silicon and HBM)."""
    rows = _hardware_rows()
    while key in rows:
        visible = visible_capacities().get(key)
        if visible is not None:
            return visible
        parent = rows[key].get("variant_of")
        if not parent or parent == key or parent not in rows:
            return None
        if _float(_resolved_row(parent, rows)["memory_bytes"]) != memory_bytes:
            return None
        key = parent
    return None


def hardware_names() -> list[str]:
    """Keys of the shipped hardware table."""
    return list(_hardware_rows())


def is_estimable(hw: HardwareSpec) -> bool:
    """A memory bandwidth and at least one dense peak: enough for ``estimate`` at that peak's dtype.

    The table also keeps parts measured rows name without a full spec (``h100``: form factor not
    stated; ``apple-m1-max``: no published tensor peak); ``infercast hardware`` lists them apart.
    """
    return hw.memory_bandwidth_bytes_per_s > 0 and any(v > 0 for v in hw.flops_per_s.values())


def listed_hardware_names() -> list[str]:
    """Keys ``infercast hardware`` lists: the parts :func:`is_estimable` accepts."""
    return [k for k in hardware_names() if is_estimable(load_hardware(k))]


def _hardware_from_row(row: dict[str, str]) -> HardwareSpec:
    flops = {d: _float(row.get(f"{d}_flops")) for d in COMPUTE_DTYPES if d != "int8"}
    flops["int8"] = _float(row.get("int8_ops"))
    # NVIDIA parts run bf16 and fp16 at the same tensor rate; fill a missing one from the other.
    if not flops["bf16"] and flops["fp16"] and row.get("vendor") == "nvidia":
        flops["bf16"] = flops["fp16"]
    price = default_prices().get(row["key"])
    cites = {k.removeprefix("cite_"): v for k, v in row.items() if k.startswith("cite_") and v}
    memory = _float(row["memory_bytes"])
    visible = _visible_capacity(row["key"], memory)
    if visible is not None:
        cites["memory_visible"] = visible[1]
        memory = visible[0]
    return HardwareSpec(
        key=row["key"],
        name=row["name"],
        memory_bytes=memory,
        memory_bytes_spec=_float(row["memory_bytes"]),
        memory_bandwidth_bytes_per_s=_float(row["memory_bandwidth_bytes_per_s"]),
        flops_per_s={k: v for k, v in flops.items() if v},
        link_bandwidth_bytes_per_s=_float(row["scaleup_unidir_bytes_per_s"]),
        pcie_bandwidth_bytes_per_s=_float(row["pcie_unidir_bytes_per_s"]),
        tdp_w=_float(row["tdp_w"]),
        price_per_hour=price[0] if price else None,
        price_source=price[1] if price else "",
        citations=cites,
    )


def _load_hardware_file(path: Path) -> HardwareSpec:
    text = read_text(path, "hardware file")
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"hardware file {path} is not valid TOML: {exc}") from None
    else:
        data = parse_json(text, f"hardware file {path}")
    return hardware_from_mapping(data, where=str(path))


@lru_cache(maxsize=64)
def _load_preset_hardware(key: str) -> HardwareSpec:
    return _hardware_from_row(_resolved_row(key, _hardware_rows()))


def load_hardware(name_or_path: str) -> HardwareSpec:
    """A key of data/hardware.csv, or a path to a TOML/JSON hardware spec (read afresh each
    call)."""
    name = str(name_or_path).strip()
    rows = _hardware_rows()
    if name.lower() in rows:
        return _load_preset_hardware(name.lower())
    path = Path(name).expanduser()
    if path.suffix in (".toml", ".json") and path.is_file():
        return _load_hardware_file(path)
    raise UnknownHardwareError(
        f"unknown hardware {name!r}{_suggest(name.lower(), list(rows))}: use a preset "
        "(`infercast hardware` lists them) or a .toml/.json spec file"
    )
