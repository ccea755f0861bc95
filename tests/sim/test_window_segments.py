"""Sliding-window models in the fast mode: segments past the window (replica._cap_by_window with
StepModel.decode_affine_past_window) give the step-by-step results."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infercast.sim.config import build_config
from infercast.sim.presets import build_step_model

from .helpers import run

# gpt-oss: sliding layers of window 128 between full ones; prompts past the window from the start
CLOSED = {
    "model": "gpt-oss-20b",
    "hardware": "h100-sxm",
    "workload": {
        "arrival": "closed",
        "concurrency": 24,
        "num_requests": 96,
        "input": {"dist": "uniform", "mean": 700, "std": 200},
        "output": {"dist": "uniform", "mean": 150, "std": 60},
    },
}


@pytest.fixture(scope="module")
def gpt_oss():
    return build_step_model(build_config(CLOSED))


def test_past_window_form_is_the_step_time_when_every_context_covers_the_window(gpt_oss):
    edge = gpt_oss.affine_past_window_context
    assert edge == 127  # window 128 (ops.span_pairs: a decode reads min(c, W - 1) window keys)
    rng = np.random.default_rng(3)
    for n in (1, 7, 64):
        a, b = gpt_oss.decode_affine_past_window(n)
        for _ in range(5):
            ctx = edge + rng.integers(0, 20_000, n)
            want = gpt_oss.step_time_s(np.ones(n), ctx.astype(float))
            assert a + b * ctx.sum() == pytest.approx(want, rel=1e-9)
    # below the edge the windowed layers still grow with the context: the form does not hold
    a, b = gpt_oss.decode_affine_past_window(4)
    low = np.full(4, 10.0)
    assert a + b * low.sum() > gpt_oss.step_time_s(np.ones(4), low) * (1 + 1e-6)


def test_full_attention_and_chunked_models_have_no_past_window_form():
    for model in ("llama-3.1-8b", "llama-4-scout"):
        sm = build_step_model(build_config({"model": model, "hardware": "h100-sxm", "tp": 8}))
        assert sm.affine_past_window_context == math.inf
        with pytest.raises(ValueError, match="no sliding-window layers"):
            sm.decode_affine_past_window(4)


def test_closed_loop_past_the_window_runs_segments_and_equals_the_exact_mode(gpt_oss, monkeypatch):
    fast, fast_recs = run(gpt_oss, mode="fast", **CLOSED)
    exact, exact_recs = run(gpt_oss, mode="exact", **CLOSED)
    key = {r.request_id: r for r in exact_recs}
    assert len(fast_recs) == len(exact_recs) == 96
    for r in fast_recs:
        e = key[r.request_id]
        assert r.output_tokens == e.output_tokens
        np.testing.assert_allclose(r.chunk_times_s, e.chunk_times_s, rtol=1e-9, atol=1e-12)
    # without the past-window form (the old fast path) nearly every decode step was listed
    monkeypatch.setattr(type(gpt_oss), "affine_past_window_context", math.inf)
    old, _ = run(gpt_oss, mode="fast", **CLOSED)
    assert fast.summary.tpot.mean == pytest.approx(old.summary.tpot.mean, rel=1e-9)
    assert fast.num_steps == exact.num_steps == old.num_steps
    assert fast.num_segments > 10 * max(old.num_segments, 1)
