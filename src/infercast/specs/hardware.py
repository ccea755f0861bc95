"""Accelerator spec (``HardwareSpec``): peak FLOP/s per dtype, memory, bandwidth, links, price.

Numbers come from ``data/hardware.csv`` (one citation per number, kept in
``citations``) or from a user's TOML/JSON file (see :func:`hardware_from_mapping`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infercast.errors import ConfigError
from infercast.validation import check_mapping, check_number, check_str

COMPUTE_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")


@dataclass(frozen=True)
class HardwareSpec:
    """One accelerator (or a CPU measured by ``infercast machine``).

    ``flops_per_s`` maps a compute dtype to the dense peak (no sparsity).
    ``link_bandwidth_bytes_per_s`` is the scale-up link (NVLink, xGMI) per GPU,
    one direction, which is what one ring step of an all-reduce can use.
    """

    key: str
    name: str
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    flops_per_s: Mapping[str, float]
    link_bandwidth_bytes_per_s: float = 0.0
    pcie_bandwidth_bytes_per_s: float = 0.0
    tdp_w: float = 0.0
    price_per_hour: float | None = None  # $/device-hour, None if unknown
    price_source: str = ""
    citations: Mapping[str, str] = field(default_factory=dict)
    memory_bytes_spec: float = 0.0  # the datasheet figure when memory_bytes is a measured capacity

    def peak_flops(self, dtype: str) -> float | None:
        """Dense peak FLOP/s for a compute dtype; None if the part lacks that path."""
        value = self.flops_per_s.get(dtype)
        return value if value else None

    @property
    def ridge_point(self) -> float:
        """BF16 (else FP32) ridge point in FLOP/byte: peak / bandwidth."""
        peak = self.peak_flops("bf16") or self.peak_flops("fp32") or 0.0
        return peak / self.memory_bandwidth_bytes_per_s

    def ridge_point_for(self, dtype: str) -> float:
        """Ridge point (FLOP/byte) of the given compute dtype."""
        return (self.peak_flops(dtype) or 0.0) / self.memory_bandwidth_bytes_per_s

    def with_price(self, price_per_hour: float | None, source: str = "flag") -> HardwareSpec:
        """Copy with a different $/device-hour."""
        from dataclasses import replace

        if price_per_hour is not None:
            price_per_hour = check_number(
                price_per_hour,
                f"price ({source})",
                0.0,
                fix="give $/device-hour as a finite number >= 0",
            )
        return replace(self, price_per_hour=price_per_hour, price_source=source)


def _positive(data: Mapping[str, Any], key: str, where: str, required: bool = True) -> float:
    value = data.get(key)
    if value is None:
        if required:
            raise ConfigError(f"hardware spec {where} misses {key!r}: add it (SI units)")
        return 0.0
    # a typed file: a number must be a number ("1e15" and true are refused), finite, >= 0
    return check_number(
        value,
        f"hardware spec {where}: {key}",
        0.0,
        lo_open=required,
        fix="give a positive, finite number in SI units",
    )


def hardware_from_mapping(data: Mapping[str, Any], where: str = "file") -> HardwareSpec:
    """Validate a user's hardware file (TOML/JSON) into a spec.

    Required: ``name``, ``memory_bytes``, ``memory_bandwidth_bytes_per_s`` and a
    ``[flops_per_s]`` table with at least one dtype. Optional:
    ``link_bandwidth_bytes_per_s``, ``price_per_hour``, ``tdp_w``.
    """
    check_mapping(data, f"hardware spec {where}")
    memory = _positive(data, "memory_bytes", where)
    bandwidth = _positive(data, "memory_bandwidth_bytes_per_s", where)
    flops = data.get("flops_per_s")
    if not isinstance(flops, Mapping) or not flops:
        raise ConfigError(f"hardware spec {where} needs a [flops_per_s] table, e.g. bf16 = 9.89e14")
    peaks = {}
    for dtype in flops:
        if dtype not in COMPUTE_DTYPES:
            raise ConfigError(
                f"hardware spec {where}: unknown dtype {dtype!r} in flops_per_s; use "
                f"{', '.join(COMPUTE_DTYPES)}"
            )
        peaks[dtype] = _positive(flops, dtype, where)
    for text_field in ("name", "key"):
        if data.get(text_field) is not None:
            check_str(data[text_field], f"hardware spec {where}: {text_field}")
    name = str(data.get("name") or data.get("key") or "custom")
    price = data.get("price_per_hour")
    if price is not None:
        price = check_number(
            price,
            f"hardware spec {where}: price_per_hour",
            0.0,
            fix="give $/device-hour as a finite number >= 0",
        )
    return HardwareSpec(
        key=str(data.get("key") or name),
        name=name,
        memory_bytes=memory,
        memory_bandwidth_bytes_per_s=bandwidth,
        flops_per_s=peaks,
        link_bandwidth_bytes_per_s=_positive(
            data, "link_bandwidth_bytes_per_s", where, required=False
        ),
        tdp_w=_positive(data, "tdp_w", where, required=False),
        price_per_hour=price,
        price_source=where if price is not None else "",
        citations={"file": where},
    )
