"""What-ifs in ``simulate``: the same workload re-run with one lever moved, next to the baseline.

The levers are those of ``infercast estimate --what-if`` (:mod:`infercast.whatif`):
weight-only INT4 (W4A16: fewer weight bytes, 16-bit compute, so it helps
memory-bound decode and not compute-bound prefill), W8A8 FP8 (fewer bytes and
the 8-bit peak), FP8 KV cache (twice the KV capacity, half the KV traffic), and
twice the tensor parallelism (twice the GPUs). Under load the simulator shows
what the roofline alone cannot: a bigger KV cache raises the batch the
scheduler reaches, so throughput and queueing change, not only step times.
"""

from __future__ import annotations

from infercast.errors import InfercastError
from infercast.sim.config import SimConfig


def sim_levers(cfg: SimConfig) -> list[tuple[str, dict]]:
    """(name, config changes) per lever, the baseline first; levers already in place are skipped."""
    out: list[tuple[str, dict]] = [("baseline", {})]
    if cfg.weights != "int4":
        out.append(("W4A16 int4 weights", {"weights": "int4"}))
    if cfg.weights != "fp8":
        out.append(("W8A8 fp8", {"weights": "fp8"}))
    if cfg.kv_cache != "fp8":
        out.append(("fp8 KV cache", {"kv_cache": "fp8"}))
    out.append((f"TP {cfg.tp * 2}", {"tp": cfg.tp * 2}))
    return out


def _row(name: str, cfg: SimConfig, result) -> dict:
    s = result.summary
    gpus = cfg.tp * cfg.replicas
    return {
        "lever": name, "weights": cfg.weights, "kv_cache": cfg.kv_cache or "bf16", "tp": cfg.tp, "num_gpus": gpus,
        "num_kv_blocks": result.num_blocks, "mean_batch_size": result.mean_batch_size,
        "output_throughput_tokens_per_s": s.output_throughput_tps,
        "output_throughput_per_gpu": s.output_throughput_tps / gpus,
        "ttft_p99_s": s.ttft.percentiles[99.0], "tpot_p99_s": s.tpot.percentiles[99.0],
        "num_preemptions": result.num_preemptions, "num_completed": s.completed,
    }


def run_what_if(cfg: SimConfig, profile=None) -> list[dict]:
    """Simulate ``cfg`` and each lever; a lever the part cannot do carries its error instead.

    ``profile``: the efficiency profile the baseline run used (``--profile``), so every lever is
    timed the same way (default: the code's built-in profile).
    """
    from infercast.sim.build import step_model
    from infercast.sim.run import simulate

    rows = []
    for name, change in sim_levers(cfg):
        moved = cfg.model_copy(update=change)
        try:
            rows.append(_row(name, moved, simulate(moved, step_model(moved, profile=profile))))
        except InfercastError as exc:
            rows.append({"lever": name, "error": str(exc)})
    return rows
