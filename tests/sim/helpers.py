"""Run small simulations from nested-dict configs and collect their records."""

from __future__ import annotations

from infercast.sim.config import build_config
from infercast.sim.run import simulate


class BudgetCheckingTimer:
    """Wraps a step model; asserts the token budget and seat limit on every costed step."""

    def __init__(self, inner, max_tokens: int, max_seqs: int):
        self.inner, self.max_tokens, self.max_seqs = inner, max_tokens, max_seqs
        self.kv_capacity_tokens = inner.kv_capacity_tokens
        self.affine_context_limit = inner.affine_context_limit
        self.num_steps = 0

    def step_time_s(self, new, cached):
        total = float(sum(new))
        assert total <= self.max_tokens or len(new) == 1, f"step of {total} tokens over budget"
        assert len(new) <= self.max_seqs
        self.num_steps += 1
        return self.inner.step_time_s(new, cached)

    def decode_affine(self, n):
        assert n <= self.max_seqs
        return self.inner.decode_affine(n)


def run(step_model, **cfg):
    """(result, records) of a simulation of ``cfg`` (nested dict, see SimConfig)."""
    records = []
    result = simulate(build_config(cfg), step_model, sink=records.append)
    return result, records


# A small closed loop (16 clients, 96 requests of ~900 in / ~200 out on Llama-3.1-8B, H100):
# the base of the scheduler-rule tests that compare one rule on and off.
CLOSED_LOOP = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "workload": {
        "arrival": "closed",
        "concurrency": 16,
        "num_requests": 96,
        "input": {"dist": "uniform", "mean": 900, "std": 60},
        "output": {"dist": "uniform", "mean": 200, "std": 30},
    },
}


def closed_loop(scheduler: dict, mode: str = "fast", **workload) -> dict:
    """:data:`CLOSED_LOOP` with ``scheduler``, ``mode`` and workload fields overridden."""
    return {
        **CLOSED_LOOP,
        "mode": mode,
        "scheduler": scheduler,
        "workload": {**CLOSED_LOOP["workload"], **workload},
    }
