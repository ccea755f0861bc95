"""Dollars: what GPUs at a price cost for a throughput, or for a whole run.

At a throughput: $/M tokens = price per GPU-hour x GPUs / 3600 s/h / (tokens/s) x 1e6
(estimate, plan, the ui's simulate view).

For a run: GPUs x wall time x price, and $/M tokens split between input and output.

A run of ``duration_s`` on ``gpus`` GPUs at ``price`` $/GPU-hour costs
``gpus * duration_s / 3600 * price``: rented GPUs cost the same busy or idle. The
input tokens' share of the dollars is a caller's ``prefill_share`` (the simulator: prefill's
share of the busy time; bench: TTFT's share of the requests' time; a disaggregated run: the
prefill pool's share of the GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infercast.errors import ConfigError


@dataclass(frozen=True)
class RunUsage:
    """What a run consumed, in the units the economics need (from a ``SimResult``)."""

    duration_s: float
    gpus: int
    input_tokens: float
    output_tokens: float
    requests: int
    busy_replica_s: float  # summed over replicas
    mean_batch: float
    replicas: int


def dollars_per_million_tokens(
    price_per_gpu_hour: float, num_gpus: int, tokens_per_s: float
) -> float:
    """$ per million tokens at ``tokens_per_s`` on ``num_gpus`` GPUs (inf when nothing is
    produced)."""
    if tokens_per_s <= 0:
        return float("inf")
    return price_per_gpu_hour * num_gpus / 3600.0 / tokens_per_s * 1e6


def check_price(price_per_hour: float | None, where: str = "--price") -> None:
    """A price must be a finite number >= 0 ($/GPU-hour)."""
    if price_per_hour is not None and (not math.isfinite(price_per_hour) or price_per_hour < 0):
        raise ConfigError(f"{where} must be a finite number >= 0 $/GPU-hour, got {price_per_hour}")


def dollars(
    usage: RunUsage, price_per_hour: float | None, prefill_share: float
) -> dict[str, float | None]:
    """$/hour, GPU-hours, $ and $/M input and output tokens of a run (None without a price)."""
    gpu_hours = usage.gpus * usage.duration_s / 3600.0
    out: dict[str, float | None] = {"gpu_hours": gpu_hours, "price_per_gpu_hour": price_per_hour}
    if price_per_hour is None:
        out.update(
            usd_per_hour=None,
            usd=None,
            usd_per_million_input_tokens=None,
            usd_per_million_output_tokens=None,
            usd_per_million_tokens=None,
        )
        return out
    usd = gpu_hours * price_per_hour
    share = min(max(prefill_share, 0.0), 1.0)

    def per_m(x: float, tokens: float) -> float | None:
        return x / tokens * 1e6 if tokens > 0 else None

    out.update(
        usd_per_hour=usage.gpus * price_per_hour,
        usd=usd,
        usd_per_million_input_tokens=per_m(usd * share, usage.input_tokens),
        usd_per_million_output_tokens=per_m(usd * (1 - share), usage.output_tokens),
        usd_per_million_tokens=per_m(usd, usage.input_tokens + usage.output_tokens),
    )
    return out
