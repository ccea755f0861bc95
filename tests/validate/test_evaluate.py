"""Evaluator: a row's failed simulation is skipped with its reason; the run goes on."""

from __future__ import annotations

import os
from types import SimpleNamespace

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.profiles import ProfileSet
from infercast.validate import simrun
from infercast.validate.evaluate import Evaluator, SimFailure, run_simulations

# A small closed-loop TPOT row (256 in, 32 out, 4 clients): quick to simulate.
SMALL = dict(
    id="R-1-tpot",
    metric="tpot_mean_s",
    value=0.01,
    input_tokens=256,
    output_tokens=32,
    concurrency=4,
)


def _boom(*args):
    raise RuntimeError("step time is NaN")


def test_run_simulations_returns_a_failure_in_place_of_a_raising_task():
    ok = lambda profile: 42.0  # noqa: E731 (a closure: run inline, not pickled)
    got = run_simulations({"a": (_boom, EfficiencyProfile()), "b": (ok, EfficiencyProfile())}, 1)
    assert got["b"] == 42.0
    assert got["a"] == SimFailure("simulation failed: RuntimeError: step time is NaN")


def test_a_row_whose_simulation_fails_is_skipped_with_the_reason(monkeypatch, concurrency_row):
    rows = [concurrency_row(**SMALL), concurrency_row(**SMALL | dict(id="R-2-tpot", concurrency=8))]
    calls = []

    def call(self, profile):
        calls.append(self.config.workload.num_requests)
        if len(calls) == 1:
            raise ValueError("KV cache holds no sequence")
        return real(self, profile)

    real = simrun.SimTask.__call__
    monkeypatch.setattr(simrun.SimTask, "__call__", call)
    first, second = Evaluator(rows, prefer_simulator=True, workers=1).predict(ProfileSet())
    assert len(calls) == 2  # both rows simulated (one run each)
    failed, done = (first, second) if first.predicted is None else (second, first)
    assert failed.skipped_reason == "simulation failed: ValueError: KV cache holds no sequence"
    assert done.predicted is not None and done.predicted > 0 and done.closed_form is not None


def test_the_closed_form_path_does_not_simulate_concurrency_rows(monkeypatch, concurrency_row):
    monkeypatch.setattr(simrun.SimTask, "__call__", _boom)
    (p,) = Evaluator([concurrency_row(**SMALL)]).predict(ProfileSet())
    assert p.predicted is not None and p.closed_form is None


def test_a_disaggregated_prefill_pool_keeps_the_experts_own_format(concurrency_row):
    # gpt-oss-120b's MXFP4 experts: one GB200 holds them; stored at bf16 they would not fit
    from infercast.sim.build import pool_step_model
    from infercast.validate.ledger import setup_step_model

    pool = {"tp_size": "1", "attention_dp_size": "1", "moe_ep_size": "1"}
    row = concurrency_row(
        **SMALL
        | dict(
            scenario="disaggregated",
            model="gpt-oss-120b",
            hardware="gb200",
            engine="trtllm-1.0",
            weights="fp4",
            input_tokens=1024,
            output_tokens=1024,
            concurrency=8,
            n_gpus=3,
            extra={"prefill": pool, "decode": {**pool, "tp_size": "2"}},
        )
    )
    (plan,) = Evaluator([row], prefer_simulator=True, assume_weights="checkpoint").plans
    task = plan.simulate
    assert task.setup.experts and task.config.experts == task.setup.experts
    cfg = task.config
    prefill = pool_step_model(cfg, cfg.disaggregation.prefill, setup_step_model(task.setup, None))
    assert prefill.kv_capacity_tokens > 100_000


class _Exits:
    """A pooled task (it has a config) whose worker process dies."""

    config = SimpleNamespace(
        workload=SimpleNamespace(num_requests=1, output=SimpleNamespace(mean=1))
    )

    def __call__(self, profile):
        os._exit(3)


def test_a_dead_worker_process_is_a_failure_not_a_crash():
    got = run_simulations({"a": (_Exits(), EfficiencyProfile()), "b": (_Exits(), None)}, 2)
    assert set(got) == {"a", "b"}
    assert all(
        isinstance(r, SimFailure) and "worker process ended" in r.reason for r in got.values()
    )
