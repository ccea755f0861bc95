"""Arrival schedules: rate and burstiness statistics for a seed; ramps; achieved concurrency."""

import numpy as np
import pytest

from infercast.bench.load import achieved_concurrency, arrival_offsets, ramp_offsets
from infercast.errors import ConfigError
from infercast.metrics.records import RequestRecord


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_gamma_schedule_mean_rate_and_cv(burstiness):
    off = arrival_offsets(40_000, rate=20.0, rng=np.random.default_rng(7), burstiness=burstiness)
    gaps = np.diff(off)
    assert off[0] == 0.0 and np.all(gaps >= 0)
    assert 1 / gaps.mean() == pytest.approx(20.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.05)


def test_poisson_counts_per_second_are_poisson():
    off = arrival_offsets(30_000, rate=10.0, rng=np.random.default_rng(3))
    counts = np.bincount(off.astype(int))[:-1]  # drop the partial last second
    assert counts.mean() == pytest.approx(10.0, rel=0.03)
    assert counts.var() / counts.mean() == pytest.approx(
        1.0, abs=0.08
    )  # dispersion index of Poisson


def test_infinite_rate_and_bad_rate():
    assert np.all(arrival_offsets(5, float("inf"), np.random.default_rng(0)) == 0)
    with pytest.raises(ConfigError):
        arrival_offsets(5, 0.0, np.random.default_rng(0))


def test_ramp_gets_faster():
    gaps = np.diff(ramp_offsets(20_000, 1.0, 100.0, np.random.default_rng(0)))
    assert gaps[:1000].mean() > 5 * gaps[-1000:].mean()


def test_achieved_concurrency_counts_only_while_sending():
    recs = [
        RequestRecord(str(i), 0.0, 1, send_s=float(i), finish_s=float(i) + 2.0) for i in range(5)
    ]
    # sends at 0..4, each lasts 2 s: in flight 1 on [0,1), 2 after -> (1 + 2 + 2 + 2) / 4
    assert achieved_concurrency(recs, 0.0) == pytest.approx(7 / 4)


def _result(lags_ms=(0.5,), cpu=0.1, achieved=8.0):
    from infercast.bench.load import LoadResult

    recs = [RequestRecord("r", 0.0, 1, finish_reason="stop")]
    return LoadResult(recs, 1.0, achieved, 8, np.array(lags_ms) / 1e3, cpu, 0)


def test_client_bottleneck_warnings():
    from infercast.bench.load import LoadPlan, client_warnings

    closed, opened = LoadPlan(concurrency=8), LoadPlan(request_rate=10.0)
    assert client_warnings(closed, _result(), 0.0) == []
    assert "late" in client_warnings(opened, _result(), 0.005)[0]
    assert "event loop" in client_warnings(closed, _result(lags_ms=[10.0] * 20), 0.0)[0]
    assert "core" in client_warnings(closed, _result(cpu=0.95), 0.0)[0]
    assert "concurrency" in client_warnings(closed, _result(achieved=5.0), 0.0)[0]


def test_no_concurrency_warning_when_requests_just_fail():
    from infercast.bench.load import LoadPlan, LoadResult, client_warnings

    recs = [RequestRecord("r", 0.0, 1, error="HTTP 500", finish_reason="error")] * 3
    res = LoadResult(recs, 1.0, 0.1, 1, np.array([0.0005]), 0.1, 0)
    assert client_warnings(LoadPlan(concurrency=8), res, 0.0) == []
