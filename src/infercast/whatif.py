"""What-ifs: the same question asked again with one lever moved, side by side with the baseline.

Levers (:func:`lever_moves`, the one list both faces use): weight-only INT4 (W4A16: fewer
bytes, same 16-bit compute, so it helps memory-bound decode and not compute-bound prefill),
W8A8 FP8 (fewer bytes and the 8-bit peak), FP8 KV cache (twice the KV capacity, half the KV
traffic), and twice the tensor parallelism (twice the GPUs); a lever already in place is
skipped.

- ``estimate --what-if`` (:func:`what_if`): each row reports unloaded TTFT, decode at batch 1
  and decode at the largest batch that fits, so "helps when memory-bound, not when
  compute-bound" is visible rather than asserted.
- ``simulate --what-if`` (:func:`simulate_what_if`): the same workload re-run per lever. Under
  load the simulator shows what the roofline alone cannot: a bigger KV cache raises the batch
  the scheduler reaches, so throughput and queueing change, not only step times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infercast.errors import InfercastError, with_flags
from infercast.estimate import Estimate, EstimateRequest, estimate
from infercast.specs.parallel import Parallelism


@dataclass(frozen=True)
class WhatIf:
    """One lever's outcome next to the baseline's."""

    lever: str
    estimate: Estimate | None
    error: str | None = None

    def summary(self, context: int) -> dict[str, Any]:
        if self.estimate is None:
            return {"lever": self.lever, "error": self.error}
        e = self.estimate
        sm = e.step_model
        mb = sm.memory.max_batch(context)
        one = sm.decode_cost(1, context)
        big = sm.decode_cost(mb, context) if mb > 0 else None
        return {
            "lever": self.lever,
            "weights": sm.precision.weights,
            "compute": sm.precision.compute,
            "kv_cache": sm.precision.kv_cache,
            "experts": sm.experts.spec if sm.experts else None,
            "tp": e.parallel.tp,
            "ttft_s": e.ttft_s,
            "tpot_batch1_s": one.time_s,
            "bound_batch1": one.bound,
            "max_batch": mb,
            "tokens_per_s_max_batch": (mb / big.time_s) if big else 0.0,
            "bound_max_batch": big.bound if big else None,
            "tokens_per_s_per_gpu_max_batch": (mb / big.time_s / e.num_gpus) if big else 0.0,
        }


def lever_moves(weights: str, kv_cache: str | None, tp: int) -> list[tuple[str, dict[str, Any]]]:
    """(name, the settings it moves: ``weights``, ``kv_cache`` or ``tp``) per lever, the baseline
    first, for a system running ``weights``/``kv_cache`` at tensor parallelism ``tp``."""
    out: list[tuple[str, dict[str, Any]]] = [("baseline", {})]
    if weights != "int4":
        out.append(("W4A16 int4 weights", {"weights": "int4"}))
    if weights != "fp8":
        out.append(("W8A8 fp8", {"weights": "fp8"}))
    if kv_cache != "fp8":
        out.append(("fp8 KV cache", {"kv_cache": "fp8"}))
    out.append((f"TP {tp * 2}", {"tp": tp * 2}))
    return out


def levers(base: Estimate) -> list[tuple[str, dict[str, Any]]]:
    """The alternative settings tried against ``base`` (name, changes to estimate's kwargs)."""
    p, par = base.step_model.precision, base.parallel
    out: list[tuple[str, dict[str, Any]]] = []
    for name, move in lever_moves(p.weights, p.kv_cache, par.tp):
        change = dict(move)
        if "weights" in move:  # the whole model, experts stored apart (gpt-oss MXFP4) included
            change.update(compute=None, experts="none")
        if "tp" in move:
            change = {"parallel": Parallelism(tp=change.pop("tp"), pp=par.pp, ep=par.ep)}
        out.append((name, change))
    return out


def what_if(base: Estimate) -> list[WhatIf]:
    """Re-run ``base`` with each lever moved; a lever the part cannot do carries its error."""
    sm = base.step_model
    request = EstimateRequest(
        model=base.model,
        hardware=base.hardware,
        weights=sm.precision.weights,
        kv_cache=sm.precision.kv_cache,
        compute=sm.precision.compute,
        batches=[1],
        context=base.context,
        prompt=base.prompt_tokens,
        parallel=base.parallel,
        profile=base.profile,
        memory_fraction=sm.memory.available_bytes / sm.memory.device_bytes,
        experts=sm.experts.spec if sm.experts else "none",
    )
    results = []
    for name, change in levers(base):
        try:
            results.append(WhatIf(name, estimate(request, **change)))
        except InfercastError as exc:
            results.append(WhatIf(name, None, with_flags(str(exc), {})))
    return results


def _sim_row(name: str, cfg, result) -> dict[str, Any]:
    s = result.summary
    gpus = cfg.tp * cfg.replicas
    return {
        "lever": name,
        "weights": cfg.weights,
        "kv_cache": cfg.kv_cache or "bf16",
        "tp": cfg.tp,
        "num_gpus": gpus,
        "num_kv_blocks": result.num_blocks,
        "mean_batch_size": result.mean_batch_size,
        "output_throughput_tokens_per_s": s.output_throughput_tps,
        "output_throughput_per_gpu": s.output_throughput_tps / gpus,
        "ttft_p99_s": s.ttft.percentiles[99.0],
        "tpot_p99_s": s.tpot.percentiles[99.0],
        "num_preemptions": result.num_preemptions,
        "num_completed": s.completed,
    }


def simulate_what_if(cfg, profile=None) -> list[dict[str, Any]]:
    """Simulate ``cfg`` (a :class:`~infercast.sim.config.SimConfig`) and each lever; a lever the
    part cannot do carries its error instead.

    ``profile``: the efficiency profile the baseline run used (``--profile``), so every lever is
    timed the same way (default: the code's built-in profile).
    """
    from infercast.sim.build import step_model
    from infercast.sim.run import simulate

    rows = []
    for name, change in lever_moves(cfg.weights, cfg.kv_cache, cfg.tp):
        moved = cfg.model_copy(update=change)
        try:
            rows.append(_sim_row(name, moved, simulate(moved, step_model(moved, profile=profile))))
        except InfercastError as exc:
            rows.append({"lever": name, "error": with_flags(str(exc), {})})
    return rows
