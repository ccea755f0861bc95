"""What-ifs: the same question asked again with one lever moved, side by side with the baseline.

Levers: weight-only INT4 (W4A16: fewer bytes, same 16-bit compute), W8A8 FP8
(fewer bytes and the 8-bit peak), FP8 KV cache (more batch, less KV traffic),
and twice the tensor parallelism. Each row reports unloaded TTFT, decode at
batch 1, and decode at the largest batch that fits, so "helps when
memory-bound, not when compute-bound" is visible rather than asserted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infercast.errors import InfercastError
from infercast.estimate import Estimate, estimate
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
            "weights": sm.precision.weights, "compute": sm.precision.compute, "kv_cache": sm.precision.kv_cache,
            "experts": sm.experts.spec if sm.experts else None,
            "tp": e.parallel.tp, "ttft_s": e.ttft_s,
            "tpot_batch1_s": one.time_s, "bound_batch1": one.bound,
            "max_batch": mb,
            "tokens_per_s_max_batch": (mb / big.time_s) if big else 0.0,
            "bound_max_batch": big.bound if big else None,
            "tokens_per_s_per_gpu_max_batch": (mb / big.time_s / e.num_gpus) if big else 0.0,
        }


def levers(base: Estimate) -> list[tuple[str, dict[str, Any]]]:
    """The alternative settings tried against ``base`` (name, changes to estimate's kwargs)."""
    p, tp = base.step_model.precision, base.parallel.tp
    out: list[tuple[str, dict[str, Any]]] = [("baseline", {})]
    # a weight lever quantizes the whole model, experts stored apart (gpt-oss MXFP4) included
    if p.weights != "int4":
        out.append(("W4A16 int4 weights", {"weights": "int4", "compute": None, "experts": "none"}))
    if p.weights != "fp8":
        out.append(("W8A8 fp8", {"weights": "fp8", "compute": None, "experts": "none"}))
    if p.kv_cache != "fp8":
        out.append(("fp8 KV cache", {"kv_cache": "fp8"}))
    out.append((f"TP {tp * 2}", {"parallel": Parallelism(tp=tp * 2, pp=base.parallel.pp, ep=base.parallel.ep)}))
    return out


def what_if(base: Estimate) -> list[WhatIf]:
    """Re-run ``base`` with each lever moved; a lever the part cannot do carries its error."""
    sm = base.step_model
    kwargs: dict[str, Any] = dict(
        model=base.model, hardware=base.hardware, weights=sm.precision.weights, kv_cache=sm.precision.kv_cache,
        compute=sm.precision.compute, batches=[1], context=base.context, prompt=base.prompt_tokens,
        parallel=base.parallel, profile=base.profile, memory_fraction=sm.memory.available_bytes / sm.memory.device_bytes,
        experts=sm.experts.spec if sm.experts else "none",
    )
    results = []
    for name, change in levers(base):
        try:
            results.append(WhatIf(name, estimate(**{**kwargs, **change})))
        except InfercastError as exc:
            results.append(WhatIf(name, None, str(exc)))
    return results
