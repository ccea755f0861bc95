"""Simulator-based predictions: ``server`` rows, ``concurrency`` rows, offline latency rows.

One replica of the row is simulated with its share of the load (the row's
replicas sit behind a round-robin router and are identical); it runs chunked
continuous batching with its engine's limits (:mod:`infercast.validate.setup`),
timed by a :class:`~infercast.cost.step.StepModel` with the profile being
scored. Arrivals are Poisson at the row's total rate (server, fixed lengths: the
row's or the dataset's means), all at once (offline latency), or the closed loop
of the benchmark client the row ran (concurrency and disaggregated rows:
:mod:`infercast.sim.clients` as :func:`infercast.validate.predict.harness_workload`
picks it: its request count and length draws; the first wave's prompts collide,
as they do in the benchmarks). The simulator runs in its fast (closed-form decode
segment) mode with a fixed seed; a :class:`SimTask` pickles, so
``validate.evaluate.run_simulations`` runs them in a process pool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from infercast.cost.efficiency import EfficiencyProfile
from infercast.metrics.summary import Summary
from infercast.sim.config import SimConfig
from infercast.validate.ledger import setup_step_model
from infercast.validate.setup import Setup

SIM_METRICS = {
    "ttft_mean_s": lambda s: s.ttft.mean,
    "ttft_p99_s": lambda s: s.ttft.percentiles[99.0],
    "tpot_mean_s": lambda s: s.tpot.mean,
    "tpot_p99_s": lambda s: s.tpot.percentiles[99.0],
    "itl_mean_s": lambda s: s.itl.mean,
    "output_throughput_total": lambda s: s.output_throughput_tps,
}


@dataclass(frozen=True)
class SimTask:
    """One simulation to run under a profile: picklable, so a process pool can run it."""

    setup: Setup  # the replica (decode worker) timed with the profile being scored
    config: SimConfig

    def __call__(self, profile: EfficiencyProfile) -> Summary:
        from infercast.sim.run import simulate

        timer = setup_step_model(
            self.setup, profile
        )  # the closed forms' StepModel: same memory and precision rules
        return simulate(self.config, timer).summary


def _scheduler(s: Setup, recv_interval: int = 1) -> dict:
    out = {
        "policy": s.policy,
        "max_num_seqs": s.max_seqs,
        "max_num_batched_tokens": s.max_batched_tokens,
    }
    if recv_interval > 1:  # the server's request polling (sim/replica.py, "Request polling")
        out["recv_interval"] = recv_interval
    if s.admission != "current-use":  # the engine's admission rule (sched/admission.py)
        out["admission"] = s.admission
        out.update(s.admission_params)
    if s.max_prefill_tokens:  # SGLang's --max-prefill-tokens (sched/policies.py admit_waiting)
        out["max_prefill_tokens"] = s.max_prefill_tokens
    if s.async_scheduling:  # vLLM's async scheduling (sim/replica.py, "Async scheduling")
        out["async_scheduling"] = True
    if s.batch_wait:  # TensorRT-LLM's batch waiting (sched/admission.py BatchWait)
        out["batch_wait_timeout_iters"], out["batch_wait_max_tokens_ratio"] = s.batch_wait
    if s.adp_balance and s.attn_dp and s.tp > 1:  # TensorRT-LLM's attention-DP balance
        out["adp_ranks"] = s.tp
        out["adp_timeout_iters"], out["adp_batching_wait_iters"] = s.adp_balance
    return out


def sim_predictor(s: Setup, workload: dict, recv_interval: int = 1) -> tuple[tuple, SimTask]:
    """(cache key, task profile -> simulated Summary) of one replica under ``workload`` (the
    simulator's workload table: Poisson arrivals, a harness's closed loop from
    :func:`infercast.sim.clients.closed_loop_workload`, or all requests at t = 0); rows of one
    run share the key. ``recv_interval``: decode steps between the server's polls for new
    requests (a run that set SGLang's ``--scheduler-recv-interval``)."""
    from infercast.sim.config import build_config

    cfg = build_config(
        {
            "model": s.model,
            "hardware": s.hardware,
            "replicas": 1,
            "mode": "fast",
            "seed": 0,
            "scheduler": _scheduler(s, recv_interval),
            "workload": workload,
        }
    )
    key = (s, json.dumps(workload, sort_keys=True))
    return (key + (recv_interval,) if recv_interval > 1 else key), SimTask(s, cfg)


def disagg_predictor(
    s: Setup,
    prefill: tuple[int, int, bool],
    workers: tuple[int, int],
    workload: dict,
    decode_limit: int | None = None,
    prefill_seats: int | None = None,
) -> tuple[tuple, SimTask]:
    """Disaggregated prefill/decode pools (``infercast.sim.disagg``) under a closed-loop
    ``workload``.

    ``s`` is one decode worker (timed with the profile being scored); ``prefill`` is a
    prefill worker's (GPUs, EP, attention DP). The simulator builds the prefill pool's
    cost model itself from the decode worker's (``sim.build.pool_step_model``): same
    profile, part and memory fraction. ``decode_limit`` (running sequences per decode
    worker) and ``prefill_seats`` (prompts a prefill worker takes at once) are the
    stated-layout rules of :mod:`infercast.closedform.disagg` (``decode_running_limit``,
    ``prefill_seats``), so the simulator and the closed form run the same engines.
    """
    from infercast.sim.config import build_config

    gp, ep_p, dp_p = prefill
    cfg = build_config(
        {
            "model": s.model,
            "hardware": s.hardware,
            "weights": s.weights,
            # the routed experts' own format (gpt-oss: MXFP4): the prefill pool's model is built
            # from this config, so without it its experts would be stored at ``weights``
            **({"experts": s.experts} if s.experts else {}),
            "kv_cache": s.kv_cache,
            "tp": s.tp,
            "ep": s.ep,
            "attn_dp": s.attn_dp,
            "mode": "fast",
            "seed": 0,
            "scheduler": _scheduler(s),
            "workload": workload,
            "disaggregation": {
                "prefill": {
                    "replicas": workers[0],
                    "tp": gp,
                    "ep": ep_p,
                    "attn_dp": dp_p,
                    **({"max_num_seqs": prefill_seats} if prefill_seats else {}),
                },
                "decode": {
                    "replicas": workers[1],
                    **(
                        {
                            "max_num_seqs": decode_limit,  # a decode step: one token per sequence
                            "max_num_batched_tokens": max(s.max_batched_tokens, decode_limit),
                        }
                        if decode_limit
                        else {}
                    ),
                },
            },
        }
    )
    key = (
        "disagg",
        s,
        prefill,
        workers,
        json.dumps(workload, sort_keys=True),
        decode_limit,
        prefill_seats,
    )
    return key, SimTask(s, cfg)
