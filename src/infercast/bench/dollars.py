"""Dollars of a measured run: the part's price x GPUs x the run's wall time (``cost/dollars.py``).

The input tokens' share of the dollars is the time the requests spent before their first
token (sum of TTFT) over their whole time (sum of E2E): what the client saw of prefill.
"""

from __future__ import annotations

from infercast.cost.dollars import RunUsage, check_price, dollars
from infercast.errors import ConfigError


def bench_price(hardware: str | None, price_per_hour: float | None) -> tuple[float | None, str]:
    """($/GPU-hour, source): ``--price``, else the shipped table's price of ``--hardware``."""
    check_price(price_per_hour)
    if price_per_hour is not None:
        return price_per_hour, "--price"
    if hardware is None:
        return None, ""
    from infercast.specs.catalog import load_hardware

    hw = load_hardware(hardware)
    if hw.price_per_hour is None:
        raise ConfigError(f"no shipped price for {hw.key!r}: pass `price` $/GPU-hour")
    return hw.price_per_hour, hw.price_source


def run_dollars(summary, records, gpus: int, price_per_hour: float) -> dict[str, float | None]:
    """Dollar keys of one bench run (``cost.dollars.dollars``)."""
    if gpus < 1:
        raise ConfigError(f"`gpus` must be >= 1, got {gpus}")
    ok = [r for r in records if r.ok and r.ttft_s is not None and r.e2e_s]
    e2e = sum(r.e2e_s for r in ok)
    share = sum(r.ttft_s for r in ok) / e2e if e2e > 0 else 0.0
    usage = RunUsage(
        summary.duration_s or 0.0,
        gpus,
        float(summary.total_input_tokens),
        float(summary.total_output_tokens),
        summary.completed,
        0.0,
        0.0,
        1,
    )
    return dollars(usage, price_per_hour, share)
