"""Each mock mode is measured right: TTFT, TPOT, ITL and token counts against the mock's truth.

The mock runs in a thread of this process (sharing the GIL with the client), so
tolerances are a few ms; the precise client-error figures live in benchmarks/.
"""

import numpy as np
import pytest

from infercast.bench.mock import MockConfig

from .helpers import bench_mock, word_tokenizer

TTFT, ITL = 0.03, 0.005
TOL = 0.004  # s, on means, against what the mock recorded it did
TOL_NOMINAL = 0.008  # s, against the mock's nominal schedule (its sleeps overshoot under load)


def truth_mean(rows, key):
    return float(np.mean([r[key] for r in rows]))


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_empty_role_chunk_does_not_start_ttft(endpoint):
    res, truth = bench_mock(MockConfig(ttft_s=TTFT, itl_s=ITL, role_chunk=True), endpoint=endpoint)
    s = res.summary
    assert s.completed == 6 and s.failed == 0
    assert s.ttft.mean == pytest.approx(truth_mean(truth, "ttft_s"), abs=TOL)
    assert s.ttft.mean > TTFT - 0.001  # an empty role chunk at t=0 would give ~1 ms
    assert s.tpot.mean == pytest.approx(truth_mean(truth, "tpot_s"), abs=0.001)
    assert s.tpot.mean == pytest.approx(ITL, abs=TOL_NOMINAL / 4)
    assert s.itl.mean == pytest.approx(s.tpot.mean, rel=1e-9)  # one token per chunk: the same gaps
    assert s.total_output_tokens == 6 * 8 and s.token_count_source == "usage"


def test_multi_token_chunks_spread_itl_per_token():
    k, n = 3, 10
    res, truth = bench_mock(MockConfig(ttft_s=TTFT, itl_s=ITL, tokens_per_chunk=k), output_tokens=n)
    s = res.summary
    assert s.tokens_per_chunk == pytest.approx(n / 4)  # chunks of 3, 3, 3, 1
    assert s.tpot.mean == pytest.approx(truth_mean(truth, "tpot_s"), abs=0.001)
    assert s.tpot.mean == pytest.approx((n - k) * ITL / (n - 1), abs=TOL_NOMINAL / 4)
    # per token: the 3 gaps of a request (k, k, 1 tokens) spread over the 7 tokens after the first
    # chunk
    assert s.itl.mean == pytest.approx(s.tpot.mean * (n - 1) / (n - k), rel=0.02)
    assert s.itl.mean == pytest.approx(ITL, abs=TOL_NOMINAL / 4)
    assert s.itl_chunk.median == pytest.approx(k * ITL, abs=TOL_NOMINAL / 4)  # per chunk
    assert s.total_output_tokens == 6 * n


def test_without_usage_tokenizer_counts_and_chunks_are_the_fallback(tmp_path):
    path = str(tmp_path / "tok.json")
    word_tokenizer().save(path)
    mock = MockConfig(ttft_s=TTFT, itl_s=ITL, tokens_per_chunk=2, usage=False)
    res, _ = bench_mock(mock, tokenizer_path=path, output_tokens=8)
    assert (
        res.summary.token_count_source == "tokenizer" and res.summary.total_output_tokens == 6 * 8
    )
    res, _ = bench_mock(mock, output_tokens=8)
    # no usage, no tokenizer: 4 chunks of 2 are counted as 4 tokens, and say so
    assert res.summary.token_count_source == "chunks" and res.summary.total_output_tokens == 6 * 4


def test_early_stop_counts_tokens_produced_not_requested():
    res, _ = bench_mock(
        MockConfig(ttft_s=TTFT, itl_s=ITL, stop_after_tokens=4, usage=False), output_tokens=16
    )
    s = res.summary
    assert s.total_output_tokens == 6 * 4 and s.finish_reasons == {"stop": 6}
    assert s.tpot.mean == pytest.approx(ITL, abs=0.0015)  # 3 gaps / 3, not / 15


def test_reasoning_gives_time_to_first_answer():
    res, truth = bench_mock(MockConfig(ttft_s=TTFT, itl_s=ITL, reasoning_tokens=3))
    s = res.summary
    assert s.ttft.mean == pytest.approx(truth_mean(truth, "ttft_s"), abs=TOL)
    assert s.time_to_first_answer.mean - s.ttft.mean == pytest.approx(3 * ITL, abs=TOL_NOMINAL)


def test_close_after_stream_loses_nothing():
    mock = MockConfig(ttft_s=0.005, itl_s=0.001, close_after_stream=True)
    res, _ = bench_mock(mock, num_requests=30, concurrency=4, output_tokens=4)
    assert res.summary.completed == 30 and res.summary.failed == 0


@pytest.mark.parametrize(
    "mock,reason,failed",
    [
        (MockConfig(ttft_s=0.01, itl_s=0.001, http_error_every=2), "HTTP 500", 3),
        (
            MockConfig(
                ttft_s=0.01, itl_s=0.001, midstream_close_every=3, midstream_close_after_chunks=2
            ),
            "connection closed mid-stream",
            2,
        ),
        (MockConfig(ttft_s=0.01, itl_s=0.001, hang_every=3), "timeout", 2),
    ],
)
def test_failures_are_counted_with_reasons(mock, reason, failed):
    # warm-up is request 1 of the mock; measured requests are its 2..7
    res, _ = bench_mock(mock, timeout_s=0.3)
    s = res.summary
    assert s.total == 6 and s.failed == failed and s.completed == 6 - failed
    assert s.failure_reasons == {reason: failed}


def test_duration_limit_stops_sending_and_counts_every_request():
    res, _ = bench_mock(
        MockConfig(ttft_s=0.01, itl_s=0.001), num_requests=1000, output_tokens=3, max_duration_s=0.3
    )
    s = res.summary
    assert 0 < s.completed < 1000 and s.total == s.completed == len(res.records)


def test_trace_replay_keeps_the_trace_gaps():
    res, _ = bench_mock(
        MockConfig(ttft_s=0.005, itl_s=0.001),
        dataset="azure-code",
        num_requests=4,
        max_input_tokens=50,
        concurrency=None,
        output_tokens=1,
    )
    arrivals = sorted(r.arrival_s for r in res.records)
    # azure-code rows 2..5 arrive at 0.052, 0.098189, 0.140684, ... s: gaps kept exactly
    assert np.diff(arrivals)[:2] == pytest.approx([0.098189 - 0.052, 0.140684 - 0.098189], abs=1e-6)
    assert res.summary.completed == 4 and res.to_json()["request_rate"] == "trace:azure-code"


def test_open_loop_with_a_concurrency_cap_never_exceeds_it():
    res, _ = bench_mock(
        MockConfig(ttft_s=0.01, itl_s=0.001),
        request_rate=float("inf"),
        concurrency=3,
        num_requests=12,
        output_tokens=2,
    )
    assert res.load.max_in_flight == 3 and res.summary.completed == 12
    # all 12 were scheduled at t=0: waiting for a slot shows up as send lag and in TTFT
    assert res.summary.send_lag.percentiles[90.0] > 0.01
