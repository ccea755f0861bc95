"""The serving loop's own work (engine/serve_probe.py): the engine's code with a stub forward,
and the line through the per-step times that ``infercast machine`` writes into the profile."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.engine import serve_probe
from infercast.engine.config import named_config
from infercast.engine.profile_fit import Fit, with_serving
from infercast.engine.tokenizer import ByteTokenizer


def _tiny():
    cfg = named_config("tiny")
    return cfg, ByteTokenizer(cfg.vocab_size)


def test_decode_run_drives_the_real_engine_one_token_per_request_per_step():
    cfg, tok = _tiny()
    cpu_s, events = serve_probe._decode_run(cfg, tok, 3, 5)
    assert cpu_s >= 0 and len(events) == 15
    assert {ev.request_id for ev in events} == {"r0", "r1", "r2"}
    assert all(ev.token_id is not None and not ev.finished for ev in events)


def test_stream_cost_runs_the_servers_sse_generator():
    cfg, tok = _tiny()
    _, events = serve_probe._decode_run(cfg, tok, 1, 4)
    assert serve_probe._stream_s(events) >= 0


def test_measure_splits_step_and_token_costs_by_the_line_through_the_batches(monkeypatch):
    """Per-step times 200 us + 30 us per request give back 200 us a step, 30 us a token."""
    cfg, tok = _tiny()
    _, events = serve_probe._decode_run(cfg, tok, 1, 2)
    monkeypatch.setattr(
        serve_probe, "_decode_run", lambda c, t, b, steps, evict=None: (200e-6 + 30e-6 * b, events)
    )
    monkeypatch.setattr(serve_probe, "_stream_s", lambda evs: 5e-6)
    cost = serve_probe.measure(cfg, tok, runs=2, evict_bytes=0)
    assert cost.step_s == pytest.approx(200e-6)
    assert cost.token_s == pytest.approx(30e-6)
    assert cost.token_overhead_s == pytest.approx(35e-6)
    assert [b for b, _ in cost.per_batch_step_s] == list(serve_probe.BATCHES)


def test_a_negative_intercept_puts_all_of_it_per_token(monkeypatch):
    cfg, tok = _tiny()
    monkeypatch.setattr(
        serve_probe, "_decode_run", lambda c, t, b, steps, evict=None: (-1e-6 + 10e-6 * b, [])
    )
    cost = serve_probe.measure(cfg, tok, runs=1, evict_bytes=0)
    assert cost.step_s == 0.0 and cost.token_s > 0 and cost.stream_s == 0.0


def test_admission_runs_the_handlers_checks_and_engine_add(monkeypatch):
    """Each timed admission queues its request in a real engine (then aborts it)."""
    from infercast.engine.engine import Engine

    cfg, tok = _tiny()
    added = []
    real_add = Engine.add
    monkeypatch.setattr(
        Engine,
        "add",
        lambda self, rid, ids, params: (added.append(len(ids)), real_add(self, rid, ids, params)),
    )
    assert serve_probe._admit_s(cfg, tok, 1, 32) >= 0
    assert len(added) == 8 and len(set(added)) == 1 and added[0] > 32  # the prompt + BOS


def test_with_serving_adds_the_step_part_and_sets_the_others():
    fit = Fit(EfficiencyProfile(step_overhead_s=40e-6), (), ())
    out = with_serving(fit, 250e-6, 42e-6, 300e-6).profile
    assert out.step_overhead_s == pytest.approx(290e-6)
    assert out.token_overhead_s == pytest.approx(42e-6)
    assert out.request_admit_s == pytest.approx(300e-6)
