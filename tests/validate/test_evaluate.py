"""Evaluator: a row's failed simulation is skipped with its reason; the run goes on."""

from __future__ import annotations

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.profiles import ProfileSet
from infercast.validate import simrun
from infercast.validate.cases import Case
from infercast.validate.evaluate import Evaluator, SimFailure, run_simulations


def _row(**kw) -> Case:
    base = dict(
        id="R-1-tpot",
        scenario="concurrency",
        metric="tpot_mean_s",
        value=0.01,
        model="llama-3.1-8b",
        hardware="h100-sxm",
        engine="vllm-0.12.0",
        weights="bf16",
        input_tokens=256,
        output_tokens=32,
        concurrency=4,
    )
    return Case(**(base | kw))


def _boom(*args):
    raise RuntimeError("step time is NaN")


def test_run_simulations_returns_a_failure_in_place_of_a_raising_task():
    ok = lambda profile: 42.0  # noqa: E731 (a closure: run inline, not pickled)
    got = run_simulations({"a": (_boom, EfficiencyProfile()), "b": (ok, EfficiencyProfile())}, 1)
    assert got["b"] == 42.0
    assert got["a"] == SimFailure("simulation failed: RuntimeError: step time is NaN")


def test_a_row_whose_simulation_fails_is_skipped_with_the_reason(monkeypatch):
    rows = [_row(), _row(id="R-2-tpot", concurrency=8)]
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


def test_the_closed_form_path_does_not_simulate_concurrency_rows(monkeypatch):
    monkeypatch.setattr(simrun.SimTask, "__call__", _boom)
    (p,) = Evaluator([_row()]).predict(ProfileSet())
    assert p.predicted is not None and p.closed_form is None
