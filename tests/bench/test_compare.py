"""--compare-sim: the simulator gets the bench run's workload, and the two summaries line up."""

import math

import pytest

from infercast.bench.compare import SimTarget, comparison, run_sim, sim_config_dict
from infercast.bench.run import BenchConfig
from infercast.errors import ConfigError
from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import summarize


def cfg(**kw):
    return BenchConfig(model="m", num_requests=50, input_tokens=100, output_tokens=20, **kw)


def test_workload_mapping():
    w = sim_config_dict(cfg(request_rate=4.0, burstiness=0.25), "llama-3.1-8b", "h100-sxm", "bf16")[
        "workload"
    ]
    assert (w["arrival"], w["rate"], w["cv"], w["num_requests"]) == ("gamma", 4.0, 2.0, 50)
    assert w["input"] == {"dist": "fixed", "mean": 100} and w["output"] == {
        "dist": "fixed",
        "mean": 20,
    }
    w = sim_config_dict(cfg(concurrency=8, range_ratio=0.3), "x", "y", "bf16")["workload"]
    assert (w["arrival"], w["concurrency"]) == ("closed", 8)
    assert w["input"]["dist"] == "uniform" and w["input"]["std"] == pytest.approx(
        100 * 0.3 / math.sqrt(3)
    )
    w = sim_config_dict(cfg(dataset="azure-code"), "x", "y", "bf16")["workload"]
    assert (w["arrival"], w["trace"]) == ("trace", "azure-code") and "input" not in w
    with pytest.raises(ConfigError):
        sim_config_dict(cfg(request_rate=1.0, concurrency=2), "x", "y", "bf16")


def test_simulated_summary_compares_row_by_row():
    predicted = run_sim(cfg(request_rate=2.0), SimTarget("llama-3.1-8b", "h100-sxm"))
    assert predicted.completed == 50 and predicted.total_output_tokens == 50 * 20
    measured = summarize(
        [
            RequestRecord(
                str(i),
                0.0,
                100,
                20,
                [0.1 + 0.01 * j for j in range(20)],
                finish_s=0.29,
                finish_reason="length",
            )
            for i in range(3)
        ]
    )
    rows = {r["metric"]: r for r in comparison(measured, predicted)}
    assert rows["TTFT mean (ms)"]["measured"] == pytest.approx(100.0)
    assert rows["TPOT mean (ms)"]["predicted"] == pytest.approx(predicted.tpot.mean * 1e3)
    assert rows["TPOT mean (ms)"]["predicted_over_measured"] == pytest.approx(
        predicted.tpot.mean / 0.01
    )


def _cpu_files(tmp_path):
    """A CPU hardware file with a bf16 peak 4x its float32 one, and the same fitted profile
    with and without the compute dtype it was fitted at (as ``infercast machine`` writes)."""
    hw = tmp_path / "cpu.toml"
    hw.write_text(
        'name = "local-cpu"\nmemory_bytes = 2.5e10\nmemory_bandwidth_bytes_per_s = 4e10\n'
        "link_bandwidth_bytes_per_s = 0\nprice_per_hour = 0\n\n"
        "[flops_per_s]\nfp32 = 1.4e11\nbf16 = 5.3e11\n"
    )
    body = "gemm_compute_eff = 0.7\ngemm_m_half = 1.0\nmem_bw_eff = 0.9\n"
    fitted = tmp_path / "fitted.toml"
    fitted.write_text(f'[profile]\nname = "cpu"\ncompute = "fp32"\n{body}')
    bare = tmp_path / "bare.toml"
    bare.write_text(f'[profile]\nname = "cpu"\n{body}')
    return str(hw), str(fitted), str(bare)


def test_compare_sim_prices_matmuls_at_the_peak_the_profile_was_fitted_at(tmp_path):
    hw, fitted, bare = _cpu_files(tmp_path)
    run = cfg(concurrency=2)
    model = "gemma-3-1b"
    by_profile = run_sim(run, SimTarget(model, hw, "int4", profile=fitted))
    default = run_sim(run, SimTarget(model, hw, "int4", profile=bare))  # int4 -> the bf16 peak
    sim_fp32 = tmp_path / "sim.toml"
    sim_fp32.write_text('compute = "fp32"\n')
    by_config = run_sim(run, SimTarget(model, hw, "int4", str(sim_fp32), bare))
    assert by_profile.ttft.mean == pytest.approx(by_config.ttft.mean, rel=1e-12)
    assert by_profile.ttft.mean > 1.5 * default.ttft.mean  # a compute-bound prefill, 3.8x peak
    # a config that names its compute dtype keeps it
    sim_bf16 = tmp_path / "sim16.toml"
    sim_bf16.write_text('compute = "bf16"\n')
    kept = run_sim(run, SimTarget(model, hw, "int4", str(sim_bf16), fitted))
    assert kept.ttft.mean == pytest.approx(default.ttft.mean, rel=1e-12)


def _served(arrivals, prompts, outputs, ok=True):
    return [
        RequestRecord(
            f"r{i}",
            a,
            p,
            o,
            [a + 0.1 + 0.01 * j for j in range(o)],
            finish_s=a + 0.1 + 0.01 * o,
            finish_reason="length" if ok else "error",
            error=None if ok else "boom",
        )
        for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True))
    ]


def test_run_sim_replays_the_measured_lengths_in_a_closed_loop():
    run = cfg(concurrency=2, range_ratio=0.5)
    outputs = [5, 37, 11, 29, 3, 30]
    records = _served([0.0, 0.0, 0.3, 0.4, 0.7, 0.9], [90, 140, 60, 120, 101, 77], outputs)
    target = SimTarget("llama-3.1-8b", "h100-sxm")
    replayed = run_sim(run, target, records=records)
    assert replayed.completed == 6 and replayed.total_output_tokens == sum(outputs)
    drawn = run_sim(run, target)  # the workload's own draw: 50 requests of 10-30 tokens
    assert drawn.completed == 50 and drawn.total_output_tokens != sum(outputs)


def test_run_sim_replays_the_measured_send_times_in_an_open_loop():
    # three requests 10 s apart at a nominal 100 req/s: the replay keeps the measured gaps
    records = _served([5.0, 15.0, 25.0], [100, 100, 100], [20, 20, 20])
    got = run_sim(cfg(request_rate=100.0), SimTarget("llama-3.1-8b", "h100-sxm"), records=records)
    assert got.completed == 3 and got.duration_s > 20.0
    assert got.ttft.max < 1.0  # each one alone on the GPU: no queue


def test_a_failed_request_is_not_replayed(tmp_path):
    from infercast.bench.compare import replay_file, replays

    run = cfg(concurrency=2)
    good = _served([0.2, 0.0], [100, 90], [20, 7])
    assert replays(run, good) and not replays(run, good + _served([0.3], [100], [0], ok=False))
    assert not replays(cfg(dataset="azure-code"), good)  # a trace run: the same file
    path = tmp_path / "r.csv"
    replay_file(good, str(path))
    assert path.read_text().splitlines() == [
        "arrival_s,prompt_tokens,output_tokens",
        "0.000000,90,7",
        "0.200000,100,20",
    ]


def test_lockstep_note_only_for_a_closed_loop_of_equal_lengths():
    from infercast.bench.compare import lockstep_note

    assert "range-ratio" in lockstep_note(cfg(concurrency=4))
    assert lockstep_note(cfg(concurrency=4, range_ratio=0.5)) is None
    assert lockstep_note(cfg(request_rate=2.0)) is None
    assert lockstep_note(cfg(concurrency=1)) is None
