"""Dollars and energy of a finished run: GPU-hours x price, idle + dynamic joules.

A run of ``duration_s`` on ``gpus`` GPUs at ``price`` $/GPU-hour costs
``gpus * duration_s / 3600 * price`` dollars: the GPUs are rented for the whole run,
busy or idle. $/M tokens divides that by the tokens served. The split between input
and output tokens follows the replicas' busy time: prefill's share is the prompt
tokens' prefill time (the cost model's prefill at the run's mean prompt) over all busy
time; idle time is shared in the same proportion (``docs/energy.md``).

Energy follows :mod:`infercast.cost.energy`: each replica draws its idle power for the
whole run, plus each token's dynamic energy (prefill per prompt token, decode per output
token at the run's mean batch size and mean decode context).
"""

from __future__ import annotations

from typing import Any

from infercast.cost.dollars import RunUsage, check_price, dollars
from infercast.cost.energy import (
    PowerModel,
    energy_summary,
    run_energy_j,
    token_energy,
    try_power_model,
)

__all__ = [
    "RunUsage",
    "check_price",
    "dollars",
    "economics",
    "energy",
    "prefill_share",
    "price_for",
    "run_usage",
]


def prefill_share(sm, usage: RunUsage) -> float:
    """Fraction of the replicas' busy time spent on prompts (mean-prompt prefill time x prompts)."""
    if usage.busy_replica_s <= 0 or usage.requests <= 0 or usage.input_tokens <= 0:
        return 0.0
    mean_prompt = max(1, round(usage.input_tokens / usage.requests))
    prefill_s = sm.prefill_cost(mean_prompt).time_s * usage.requests
    return min(1.0, prefill_s / usage.busy_replica_s)


def energy(sm, power: PowerModel | None, usage: RunUsage) -> dict[str, object]:
    """Energy keys of a run (``energy_summary``) plus the power model's source; empty without
    one."""
    if power is None or usage.requests <= 0:
        return {
            "energy_j": None,
            "energy_note": "no power figures for this part (add tdp_w)"
            if power is None
            else "no request completed",
        }
    mean_prompt = max(1, round(usage.input_tokens / usage.requests))
    mean_output = usage.output_tokens / usage.requests
    batch = max(1, round(usage.mean_batch)) if usage.mean_batch == usage.mean_batch else 1
    te = token_energy(sm, power, mean_prompt, batch, max(1, round(mean_prompt + mean_output / 2)))
    joules = run_energy_j(
        te, usage.replicas * usage.duration_s, usage.input_tokens, usage.output_tokens
    )
    out: dict[str, object] = dict(
        energy_summary(
            joules, usage.duration_s, usage.input_tokens, usage.output_tokens, usage.requests
        )
    )
    out["energy_idle_j"] = te.idle_w * usage.replicas * usage.duration_s
    out["power_source"] = power.source
    return out


def run_usage(result, cfg) -> RunUsage:
    """The usage of an aggregated simulate run (``SimResult`` + ``SimConfig``)."""
    s = result.summary
    d = result.to_dict()
    duration = float(d.get("duration_s") or 0.0)
    return RunUsage(
        duration,
        cfg.replicas * cfg.tp,
        float(d.get("total_input_tokens") or 0.0),
        float(d.get("total_output_tokens") or 0.0),
        int(s.completed),
        result.busy_replica_s,
        float(result.mean_batch_size),
        cfg.replicas,
    )


def economics(result, cfg, sm, price_per_hour: float | None) -> dict[str, Any]:
    """Dollars and energy of a simulate run, as JSON keys.

    A disaggregated run bills every pool's GPUs (``num_gpus``) at ``price_per_hour``; the prefill
    pool's share of the GPUs is the input tokens' share of the dollars. Its energy is not modelled
    (the pools' batches differ from the run's mean): the keys say so."""
    usage = run_usage(result, cfg)
    if cfg.disaggregation is not None:
        gpus = int(result.extra.get("num_gpus") or usage.gpus)
        d = cfg.disaggregation
        pre_gpus = d.prefill.replicas * (d.prefill.tp or cfg.tp)
        usage = RunUsage(
            usage.duration_s,
            gpus,
            usage.input_tokens,
            usage.output_tokens,
            usage.requests,
            usage.busy_replica_s,
            usage.mean_batch,
            usage.replicas,
        )
        pools: dict[str, Any] = dollars(usage, price_per_hour, pre_gpus / gpus if gpus else 0.0)
        pools.update(energy_j=None, energy_note="energy is not modelled for disaggregated runs yet")
        return pools
    out: dict[str, Any] = dollars(usage, price_per_hour, prefill_share(sm, usage))
    out.update(energy(sm, try_power_model(sm.hardware), usage))
    return out


def price_for(hardware: str, price_per_hour: float | None) -> tuple[float | None, str]:
    """($/GPU-hour, where it came from): ``--price`` if given, else the shipped price table's."""
    check_price(price_per_hour)
    if price_per_hour is not None:
        return price_per_hour, "--price"
    from infercast.specs.catalog import load_hardware

    hw = load_hardware(hardware)
    return hw.price_per_hour, hw.price_source or "no price in prices.csv: pass --price"
