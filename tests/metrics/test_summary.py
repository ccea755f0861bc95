"""Summary metrics against hand-computed values (vLLM bench serve's definitions)."""

import json
import math

import numpy as np
import pytest

from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import MetricsAccumulator, summarize


def rec(i, arrival, chunks, tokens=None, n=None, **kw):
    n = n if n is not None else (sum(tokens) if tokens else len(chunks))
    return RequestRecord(
        f"r{i}",
        arrival,
        prompt_tokens=10,
        output_tokens=n,
        chunk_times_s=chunks,
        chunk_tokens=tokens,
        finish_s=chunks[-1] if chunks else None,
        finish_reason=kw.pop("finish_reason", "length"),
        **kw,
    )


def test_one_request_by_hand():
    # chunks at 50, 60, 100 ms carrying 1, 1, 2 tokens -> 4 tokens
    r = rec(0, 0.0, [0.05, 0.06, 0.10], [1, 1, 2])
    s = summarize([r])
    assert s.ttft.mean == pytest.approx(0.05)
    assert s.e2e.mean == pytest.approx(0.10)
    assert s.tpot.mean == pytest.approx((0.10 - 0.05) / 3)
    # per token: 10 ms, then the 40 ms gap spread over 2 tokens -> 20, 20
    assert s.itl.count == 3 and s.itl.mean == pytest.approx(0.05 / 3)
    assert s.itl.median == pytest.approx(0.02)
    assert s.itl_chunk.count == 2 and s.itl_chunk.mean == pytest.approx(0.025)
    assert s.tokens_per_chunk == pytest.approx(4 / 3)
    assert s.total_output_tokens == 4 and s.total_input_tokens == 10


def test_failures_rejections_and_reasons_are_counted():
    recs = [
        rec(0, 0.0, [0.1, 0.2]),
        RequestRecord("f1", 0.0, 5, error="HTTP 500", finish_reason="error"),
        RequestRecord("f2", 0.0, 5, error="HTTP 500", finish_reason="error"),
        RequestRecord("f3", 0.0, 5, error="timeout", finish_reason="error"),
        RequestRecord("x", 0.0, 5, finish_reason="rejected", error="prompt too long"),
    ]
    s = summarize(recs)
    assert (s.completed, s.failed, s.rejected, s.total) == (1, 3, 1, 5)
    assert s.failure_reasons == {"HTTP 500": 2, "timeout": 1, "prompt too long": 1}
    assert s.ttft.count == 1  # failed requests give no latency values


def test_throughput_over_window_and_goodput():
    # 4 requests arriving 1 s apart, each 2 tokens; window 0 .. 3.5 s
    recs = [
        rec(i, float(i), [i + ttft, i + 0.5], n=2) for i, ttft in enumerate([0.1, 0.2, 0.3, 0.4])
    ]
    s = summarize(recs, slo_ttft_s=0.25, slo_tpot_s=0.35)
    assert s.duration_s == pytest.approx(3.5)
    assert s.request_throughput_rps == pytest.approx(4 / 3.5)
    assert s.output_throughput_tps == pytest.approx(8 / 3.5)
    # TTFT ok for the first two; TPOT = 0.4, 0.3 -> only request 1 meets both
    assert s.num_good == 1 and s.goodput_rps == pytest.approx(1 / 3.5)
    assert s.slo_attainment == pytest.approx(0.25)
    assert summarize(recs, duration_s=10.0).request_throughput_rps == pytest.approx(0.4)


def test_percentiles_configurable_and_vllm_keys():
    rng = np.random.default_rng(1)
    ttfts = rng.uniform(0.01, 0.2, 200)
    recs = [rec(i, 0.0, [t, t + 0.01, t + 0.03]) for i, t in enumerate(ttfts)]
    s = summarize(recs, percentiles=(25, 99.9))
    assert s.ttft.percentiles[25.0] == pytest.approx(np.percentile(ttfts, 25))
    assert s.ttft.percentiles[50.0] == pytest.approx(np.median(ttfts))
    v = s.to_vllm_dict()
    for key in (
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99.9_ttft_ms",
        "p25_tpot_ms",
        "mean_itl_ms",
        "mean_e2el_ms",
        "request_throughput",
        "output_throughput",
        "total_output_tokens",
        "duration",
        "completed",
    ):
        assert key in v
    assert v["mean_ttft_ms"] == pytest.approx(ttfts.mean() * 1e3)
    assert v["mean_tpot_ms"] == pytest.approx(15.0)


def test_to_dict_is_plain_json_and_undefined_is_none():
    s = summarize([rec(0, 0.0, [0.05])])  # one token: TPOT undefined, no ITL
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    for k in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        assert {"mean", "p50", "p90", "p99"} <= d[k].keys()
    assert d["tpot_s"]["mean"] is None and d["ttft_s"]["mean"] == pytest.approx(0.05)
    assert d["token_count_source"] == "exact"


def test_queueing_send_lag_and_first_answer_columns():
    r = rec(0, 1.0, [1.5, 1.6], first_scheduled_s=1.2, send_s=1.01, first_answer_s=1.55)
    s = summarize([r])
    assert s.queueing.mean == pytest.approx(0.2)
    assert s.send_lag.mean == pytest.approx(0.01)
    assert s.time_to_first_answer.mean == pytest.approx(0.55)


def test_streaming_folds_itl_but_keeps_exact_mean():
    acc = MetricsAccumulator(itl_exact_cap=100)
    for i in range(300):
        acc.add(rec(i, 0.0, list(0.05 + 0.01 * np.arange(11))))
    s = acc.summary()
    assert not s.itl.exact and s.itl.count == 3000
    assert s.itl.mean == pytest.approx(0.01)
    assert s.itl.median == pytest.approx(0.01, rel=0.005)
    assert s.completed == 300 and math.isclose(s.tpot.mean, 0.01)


def test_mixed_one_token_and_multi_token_chunks_pool_into_one_itl():
    a = rec(0, 0.0, [0.05, 0.06, 0.07])  # one token per chunk: gaps 10, 10 ms
    b = rec(1, 0.0, [0.05, 0.09], [1, 2])  # 40 ms over 2 tokens: 20, 20 ms per token
    s = summarize([a, b])
    assert s.itl.count == 4 and s.itl.mean == pytest.approx(0.015)
    assert s.itl_chunk.count == 3 and s.itl_chunk.mean == pytest.approx(0.02)


def test_add_many_and_add_itl_equal_add_record_by_record():
    """The simulator's columnar path (ITLs as weighted gaps) gives the record-by-record summary."""
    rng = np.random.default_rng(3)
    recs = []
    for i in range(300):
        n = int(rng.integers(1, 40))
        arrival = float(rng.uniform(0, 10))
        t = arrival + np.cumsum(rng.exponential(0.02, n))
        recs.append(
            RequestRecord(
                f"r{i}",
                arrival,
                int(rng.integers(1, 900)),
                n,
                t,
                finish_s=float(t[-1]),
                first_scheduled_s=arrival + 0.001,
                finish_reason="length",
            )
        )
    one = MetricsAccumulator(slo_ttft_s=0.05, slo_tpot_s=0.03, itl_exact_cap=2000)
    for r in recs:
        one.add(r)
    many = MetricsAccumulator(slo_ttft_s=0.05, slo_tpot_s=0.03, itl_exact_cap=2000)

    def col(f, part):
        return np.array([f(r) for r in part])

    for lo in range(0, 300, 128):
        part = recs[lo : lo + 128]
        many.add_many(
            *(
                col(f, part)
                for f in (
                    lambda r: r.arrival_s,
                    lambda r: r.prompt_tokens,
                    lambda r: r.output_tokens,
                    lambda r: r.chunk_times_s[0],
                    lambda r: r.chunk_times_s[-1],
                    lambda r: r.finish_s,
                    lambda r: r.first_scheduled_s,
                )
            )
        )
        gaps = np.concatenate([np.diff(r.chunk_times_s) for r in part])
        vals, counts = np.unique(
            gaps, return_counts=True
        )  # repeated values may come once, with a count
        many.add_itl(vals[::2], counts[::2])
        many.add_itl(vals[1::2], counts[1::2])
    a, b = one.summary().to_dict(), many.summary().to_dict()
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, dict) and "mean" in value:  # moments of ITLs: merge order, ulps
            assert value.keys() == b[key].keys(), key
            for (
                stat,
                x,
            ) in value.items():  # approx takes no None (pytest >= 9.2): compare those as is
                if x is None or b[key][stat] is None:
                    assert x == b[key][stat], (key, stat)
                else:
                    assert x == pytest.approx(b[key][stat], rel=1e-12), (key, stat)
        else:
            assert value == b[key], key


def test_column_cap_bounds_the_per_request_columns_and_keeps_the_summary():
    """With ``column_cap`` the per-request columns fold into histograms past the cap (memory
    stays constant): counts, goodput and means as exact, percentiles within 1 % (histogram bins)."""
    rng = np.random.default_rng(5)
    recs = []
    for i in range(400):
        n = int(rng.integers(1, 30))
        arrival = float(rng.uniform(0, 20))
        t = arrival + float(rng.uniform(0.01, 0.3)) + np.cumsum(rng.exponential(0.02, n))
        recs.append(
            RequestRecord(
                f"r{i}",
                arrival,
                100,
                n,
                t,
                finish_s=float(t[-1]),
                first_scheduled_s=arrival + 0.001,
                finish_reason="length",
            )
        )
    exact = summarize(recs, slo_ttft_s=0.15, slo_tpot_s=0.025)
    bounded = summarize(recs, slo_ttft_s=0.15, slo_tpot_s=0.025, column_cap=50)
    assert bounded.num_good == exact.num_good and bounded.completed == exact.completed == 400
    for name in ("ttft", "tpot", "e2e", "queueing"):
        a, b = getattr(exact, name), getattr(bounded, name)
        assert b.count == a.count and not b.exact
        assert b.mean == pytest.approx(a.mean, rel=1e-9)
        for q in (50.0, 90.0, 99.0):
            assert b.percentiles[q] == pytest.approx(a.percentiles[q], rel=0.01), (name, q)
    acc = MetricsAccumulator(slo_ttft_s=0.15, slo_tpot_s=0.025, column_cap=50)
    with pytest.raises(ValueError, match="its own SLOs"):
        acc.count_good(0.2, None)
