"""vLLM's async scheduling (``scheduler.async_scheduling``, replica "Async scheduling"): a request
that arrives while a step runs joins the step after the next one; an idle engine takes it at once;
fast (segment) and exact modes agree."""

from __future__ import annotations

import pytest

from infercast.sim.config import build_config
from infercast.sim.presets import build_step_model

from .helpers import CLOSED_LOOP, closed_loop, run

BASE = CLOSED_LOOP


def _cfg(lagged: bool, mode: str = "fast", **workload) -> dict:
    return closed_loop({"policy": "chunked", "async_scheduling": lagged}, mode, **workload)


@pytest.fixture(scope="module")
def sm():
    return build_step_model(build_config(BASE))


def test_an_idle_engine_takes_a_request_at_once(sm):
    # one client: nothing runs when its next request arrives, so nothing was scheduled ahead
    lagged, _ = run(sm, **_cfg(True, mode="exact", concurrency=1, num_requests=3))
    plain, _ = run(sm, **_cfg(False, mode="exact", concurrency=1, num_requests=3))
    assert lagged.summary.ttft.mean == pytest.approx(plain.summary.ttft.mean, rel=1e-12)


def test_a_request_arriving_under_way_waits_about_one_more_step(sm):
    # core.py step_with_batch_queue: the step after the running one was scheduled when the
    # running one started, so a successor sent at a step end starts one step later
    lagged, _ = run(sm, **_cfg(True))
    plain, _ = run(sm, **_cfg(False))
    tpot = plain.summary.tpot.mean
    extra = lagged.summary.ttft.mean - plain.summary.ttft.mean
    assert 0.5 * tpot < extra < 2.5 * tpot


def test_segments_match_the_exact_mode(sm):
    fast, _ = run(sm, **_cfg(True))
    exact, _ = run(sm, **_cfg(True, mode="exact"))
    assert fast.summary.ttft.mean == pytest.approx(exact.summary.ttft.mean, rel=1e-9)
    assert fast.summary.tpot.mean == pytest.approx(exact.summary.tpot.mean, rel=1e-9)
