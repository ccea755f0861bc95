"""SGLang's request polling (``scheduler.recv_interval``, replica "Request polling"): a request
that arrives while the engine decodes joins at its next poll, every k decode steps, or at once
after a prefill step; fast (segment) and exact modes agree."""

from __future__ import annotations

import pytest

from infercast.sim.config import build_config
from infercast.sim.presets import build_step_model

from .helpers import CLOSED_LOOP, closed_loop, run

BASE = CLOSED_LOOP


def _cfg(interval: int, mode: str = "fast", policy: str = "prefill-first", **workload) -> dict:
    return closed_loop({"policy": policy, "recv_interval": interval}, mode, **workload)


@pytest.fixture(scope="module")
def sm():
    return build_step_model(build_config(BASE))


def test_default_polls_every_step(sm):
    a, _ = run(sm, **{**BASE, "mode": "fast"})
    b, _ = run(sm, **_cfg(1, policy="chunked"))
    assert b.summary.ttft.mean == a.summary.ttft.mean


def test_an_idle_engine_takes_a_request_at_once(sm):
    # one client: the engine is idle whenever its next request arrives (the loop spins on an
    # empty queue), so polling never delays it
    res, _ = run(sm, **_cfg(30, mode="exact", concurrency=1, num_requests=3))
    one, _ = run(sm, **_cfg(1, mode="exact", concurrency=1, num_requests=3))
    assert res.summary.ttft.mean == pytest.approx(one.summary.ttft.mean, rel=1e-12)


def test_polling_delays_ttft_by_about_half_an_interval_of_decode_steps(sm):
    slow, _ = run(sm, **_cfg(30))
    fast, _ = run(sm, **_cfg(1))
    tpot = fast.summary.tpot.mean
    extra = slow.summary.ttft.mean - fast.summary.ttft.mean
    assert 5 * tpot < extra < 30 * tpot  # ~15 steps; arrivals after a prefill are taken at once


@pytest.mark.parametrize("interval", [4, 30])
def test_segments_match_the_exact_mode(sm, interval):
    fast, _ = run(sm, **_cfg(interval))
    exact, _ = run(sm, **_cfg(interval, mode="exact"))
    assert fast.summary.ttft.mean == pytest.approx(exact.summary.ttft.mean, rel=1e-9)
    assert fast.summary.tpot.mean == pytest.approx(exact.summary.tpot.mean, rel=1e-9)
