"""Replica timing against the cost model, and the fast path against the exact mode."""

import math

import numpy as np
import pytest

from .helpers import BudgetCheckingTimer, run

FIXED = {"input": {"mean": 1000}, "output": {"mean": 100}}


def test_single_request_ttft_is_prefill_and_tpot_is_decode(step_model):
    for mode in ("fast", "exact"):
        _, (rec,) = run(
            step_model, mode=mode, workload={"arrival": "offline", "num_requests": 1, **FIXED}
        )
        assert rec.ttft_s == pytest.approx(step_model.step_time_s([1000], [0]), rel=1e-9)
        decode = [step_model.step_time_s([1], [1000 + j]) for j in range(99)]
        assert rec.tpot_s == pytest.approx(np.mean(decode), rel=1e-9)
        assert rec.output_tokens == 100 and len(rec.chunk_times_s) == 100


def test_low_load_latency_matches_unloaded_estimate(step_model):
    result, records = run(step_model, workload={"rate": 0.02, "num_requests": 30, **FIXED})
    prefill = step_model.step_time_s([1000], [0])
    e2e = prefill + sum(step_model.step_time_s([1], [1000 + j]) for j in range(99))
    ttft = np.array([r.ttft_s for r in records])
    assert np.median(ttft) == pytest.approx(prefill, rel=1e-9)  # most requests run alone
    assert ttft.mean() == pytest.approx(prefill, rel=0.03)  # rare overlaps cost a little
    assert result.summary.e2e.median == pytest.approx(e2e, rel=0.01)


def _close(a, b, rel=1e-3):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


CASES = [
    dict(workload={"rate": 12, "num_requests": 600, "trace": "azure-conv"}),
    dict(
        scheduler={"policy": "continuous"},
        workload={"rate": 8, "num_requests": 400, "trace": "azure-conv"},
    ),
    dict(
        scheduler={"policy": "static", "max_num_seqs": 32},
        workload={"concurrency": 48, "num_requests": 300, **FIXED},
    ),
    dict(
        scheduler={"num_blocks": 600, "max_num_seqs": 64},  # scarce KV: preemptions
        workload={
            "arrival": "offline",
            "num_requests": 150,
            "input": {"mean": 300, "std": 100, "dist": "normal"},
            "output": {"mean": 200, "std": 150, "dist": "lognormal"},
        },
    ),
    dict(
        replicas=3,
        router="least-tokens",
        scheduler={"prefix_caching": True},
        workload={
            "arrival": "gamma",
            "cv": 3,
            "rate": 20,
            "num_requests": 500,
            "trace": "azure-code",
            "prefix_groups": 4,
            "prefix_tokens": 512,
        },
    ),
]


@pytest.mark.parametrize(
    "case", CASES, ids=["chunked", "continuous", "static-closed", "preempt", "replicas"]
)
def test_fast_path_equals_exact_mode(step_model, case):
    """Every summary metric agrees within 0.1 % (in practice to rounding)."""
    fast, _ = run(step_model, mode="fast", **case)
    exact, _ = run(step_model, mode="exact", **case)
    assert fast.num_segments > 0 and exact.num_segments == 0
    f, e = fast.summary.to_dict(), exact.summary.to_dict()
    for key, value in e.items():
        if isinstance(value, dict) and "mean" in value:
            for stat in ("count", "mean", "p50", "p90", "p99", "max"):
                assert _close(f[key][stat], value[stat]), (key, stat, f[key][stat], value[stat])
        elif isinstance(value, float):
            assert _close(f[key], value), (key, f[key], value)
    assert fast.num_preemptions == exact.num_preemptions
    if case is CASES[3]:
        assert exact.num_preemptions > 0


def test_budget_and_seats_respected_every_step(step_model):
    timer = BudgetCheckingTimer(step_model, max_tokens=512, max_seqs=16)
    result, records = run(
        timer,
        mode="exact",
        scheduler={"max_num_batched_tokens": 512, "max_num_seqs": 16},
        workload={"rate": 30, "num_requests": 200, "trace": "azure-conv"},
    )
    assert timer.num_steps == result.num_steps
    assert len(records) == 200


def test_windowed_attention_lists_requests_and_still_agrees():
    """Sliding-window models: per-request contexts matter; segments stop at the window."""
    from infercast.sim.config import build_config
    from infercast.sim.presets import build_step_model

    cfg = {
        "model": "mistral-7b",
        "workload": {"rate": 10, "num_requests": 150, "trace": "azure-conv"},
    }
    model = build_step_model(build_config(cfg))
    assert model.affine_context_limit < float("inf")
    fast, _ = run(model, mode="fast", **cfg)
    exact, _ = run(model, mode="exact", **cfg)
    assert fast.num_segments > 0
    for key in ("ttft", "tpot", "e2e"):
        a, b = getattr(fast.summary, key), getattr(exact.summary, key)
        assert _close(a.mean, b.mean) and _close(a.percentiles[99.0], b.percentiles[99.0])


def test_timeline_compaction_keeps_every_token_time(step_model, monkeypatch):
    """Dropping old step times (bounded memory) never loses a time an active request needs."""
    import infercast.sim.replica as replica

    cfg = dict(
        scheduler={"num_blocks": 800},
        workload={"rate": 25, "num_requests": 200, "trace": "azure-conv"},
    )
    _, plain = run(step_model, **cfg)
    monkeypatch.setattr(replica, "TIMELINE_COMPACT_MIN", 8)
    _, compacted = run(step_model, **cfg)
    assert [list(r.chunk_times_s) for r in plain] == [list(r.chunk_times_s) for r in compacted]


ITL_CASES = [
    CASES[3],  # preemptions
    dict(
        replicas=2,
        scheduler={
            "policy": "continuous",
            "num_blocks": 300,
            "max_num_seqs": 16,
            "max_num_batched_tokens": 1024,
        },  # prefill-only steps pause decodes
        workload={
            "rate": 30,
            "num_requests": 200,
            "input": {"dist": "uniform", "mean": 300, "std": 150},
            "output": {"dist": "normal", "mean": 150, "std": 75},
        },
    ),
    dict(
        scheduler={"num_blocks": 200, "max_num_seqs": 16, "max_num_batched_tokens": 256},
        workload={
            "concurrency": 12,
            "num_requests": 150,
            "input": {"dist": "uniform", "mean": 300, "std": 150},
            "output": {"dist": "normal", "mean": 150, "std": 75},
        },
    ),
]


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("case", ITL_CASES, ids=["preempt", "continuous", "closed-chunks"])
def test_per_step_itl_tally_equals_per_request_token_gaps(step_model, case, mode):
    """The simulator counts ITLs per step (value x requests); records' own token gaps give the same.

    Within floating-point noise, not bit for bit: a segment's gaps are taken in closed form, the
    records' as differences of its step ends (speed round 6: results agree within 1e-9 relative)."""
    from infercast.metrics.summary import summarize

    result, records = run(step_model, mode=mode, **case)
    a, b = result.summary.itl, summarize(records).itl
    assert a.count == b.count and a.percentiles.keys() == b.percentiles.keys()
    for x, y in [
        (a.min, b.min),
        (a.max, b.max),
        *zip(a.percentiles.values(), b.percentiles.values(), strict=True),
    ]:
        assert x == pytest.approx(y, rel=1e-9)
    assert a.mean == pytest.approx(b.mean, rel=1e-9) and a.std == pytest.approx(b.std, rel=1e-9)


def test_one_chunk_step_cost_is_the_mixed_step_cost_bit_for_bit(step_model):
    """The replica's list-free entry point (one prefill chunk beside the decodes) changes no
    float."""
    rng = np.random.default_rng(5)
    cases = [(0, 0, 1000, 0), (64, 80_000, 1, 700), (1, 5, 2, 0), (255, 1_000_000, 8000, 4096)]
    cases += [
        tuple(int(v) for v in rng.integers(0, [256, 2_000_000, 8192, 20_000])) for _ in range(200)
    ]
    for nd, dsum, n, c in cases:
        n = max(n, 1)
        assert step_model.chunk_step_time_s(nd, dsum, n, c) == step_model.mixed_step_time_s(
            nd, dsum, [n], [c]
        )
    # and the mixed cost still follows the itemised one (the generated attention sum included)
    assert step_model.mixed_step_time_s(3, 300, [500], [20]) == pytest.approx(
        step_model.step_time_s([1, 1, 1, 500], [100, 100, 100, 20]), rel=1e-12
    )
