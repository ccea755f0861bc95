"""The ``infercast simulate`` command contract."""

import json
import subprocess
import sys

import pytest

from infercast.cli import main

KEYS = (
    "num_requests",
    "num_completed",
    "num_rejected",
    "duration_s",
    "output_throughput_tokens_per_s",
    "request_throughput_per_s",
)


def _json(capsys, args):
    main(["simulate", *args, "--json"])
    return json.loads(capsys.readouterr().out)


def test_json_contract(capsys):
    d = _json(
        capsys,
        [
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "h100-sxm",
            "--scheduler",
            "chunked",
            "--rate",
            "4",
            "--num-requests",
            "200",
            "--trace",
            "azure-conv",
            "--seed",
            "1",
        ],
    )
    for key in KEYS:
        assert key in d, key
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        assert all(d[key][q] > 0 for q in ("mean", "p50", "p90", "p99"))
    assert d["num_requests"] == d["num_completed"] == 200 and d["num_rejected"] == 0


def test_offline_and_concurrency_modes(capsys):
    d = _json(
        capsys,
        [
            "--workload",
            "offline",
            "--input-tokens",
            "1024",
            "--output-tokens",
            "64",
            "--num-requests",
            "300",
        ],
    )
    assert d["arrival"] == "offline" and d["total_output_tokens"] == 300 * 64
    d = _json(
        capsys,
        [
            "--concurrency",
            "4,16",
            "--num-requests",
            "100",
            "--input-tokens",
            "256",
            "--output-tokens",
            "32",
        ],
    )
    assert d["sweep"] == "concurrency" and [r["concurrency"] for r in d["runs"]] == [4, 16]
    assert all(
        r["arrival"] == "closed" and r["mean_batch_size"] <= r["concurrency"] for r in d["runs"]
    )
    assert d["runs"][1]["request_throughput_per_s"] > 2 * d["runs"][0]["request_throughput_per_s"]


def test_config_file_sweep_records_and_plots(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        'model = "llama-3.1-8b"\nslo_ttft_s = 0.2\nslo_tpot_s = 0.05\n[scheduler]\npolicy = '
        '"continuous"\n[workload]\nnum_requests = 100\ntrace = "azure-code"\n'
    )
    rec = tmp_path / "records.jsonl"
    rec.write_text("a line from an earlier command\n")  # replaced, not appended to
    d = _json(
        capsys,
        [
            "--config",
            str(cfg),
            "--rate",
            "2,8",
            "--records",
            str(rec),
            "--plot",
            str(tmp_path / "plots"),
            "--timeline",
            str(tmp_path / "timeline.csv"),
        ],
    )
    header, *rows = (tmp_path / "timeline.csv").read_text().splitlines()
    assert header.startswith("time_s,replica,batch_size,kv_usage") and len(rows) > 10
    assert [r["rate_per_s"] for r in d["runs"]] == [2.0, 8.0]
    assert all(r["scheduler"] == "continuous" and r["goodput_per_s"] is not None for r in d["runs"])
    lines = rec.read_text().splitlines()
    assert len(lines) == 200 and json.loads(lines[0])["chunk_times_s"]
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {
        "latency_cdf.png",
        "timeline.png",
        "vs_rate.png",
    }


@pytest.mark.parametrize(
    "args, field",
    [
        (["--request-rate", "-1"], "--request-rate"),
        (
            ["--rate", "-1"],
            "--request-rate",
        ),  # the old name still works, and the error names the new one
        (["--scheduler", "fifo"], "scheduler.policy"),
        (["--workload", "gamma"], "rate"),
        (["--trace", "missing.csv", "--rate", "1"], "missing.csv"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, field):
    proc = subprocess.run(
        [sys.executable, "-m", "infercast.cli", "simulate", *args, "--num-requests", "5"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in proc.stderr


def test_bad_config_file_names_the_field(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[workload]\nnum_requests = 0\n")
    proc = subprocess.run(
        [sys.executable, "-m", "infercast.cli", "simulate", "--config", str(cfg)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "workload.num_requests" in proc.stderr


def test_config_example_in_the_docs_is_valid():
    import pathlib
    import re
    import tomllib

    from infercast.sim.config import SimConfig, build_config

    text = (pathlib.Path(__file__).parents[2] / "docs" / "simulator.md").read_text()
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    cfg = build_config(tomllib.loads(block))
    assert cfg.replicas == 2 and cfg.scheduler.prefix_caching and cfg.workload.rate == 8.0
    # and the full layout documented in the config module is valid too
    import importlib

    layout = importlib.import_module(SimConfig.__module__).__doc__.split("::")[1]
    lines = [ln[4:] for ln in layout.splitlines() if ln.startswith("    ")]
    full = build_config(tomllib.loads("\n".join(lines)))
    assert full.workload.resolved_arrival == "poisson"


def test_rejections_are_counted_per_rule_not_per_prompt_length(capsys):
    # Without chunking, every prompt over the token budget is rejected; prompts of many
    # lengths must land on one line of failure_reasons (the rule), not one line per length.
    d = _json(
        capsys,
        [
            "--scheduler",
            "continuous",
            "--max-num-batched-tokens",
            "1024",
            "--rate",
            "2",
            "--num-requests",
            "200",
            "--input-tokens",
            "1024",
            "--input-dist",
            "normal",
            "--input-std",
            "300",
            "--output-tokens",
            "8",
            "--seed",
            "3",
        ],
    )
    reasons = d["failure_reasons"]
    assert d["num_rejected"] > 50
    assert reasons == {
        "prompt exceeds max_num_batched_tokens=1024 without chunked prefill": d["num_rejected"]
    }


def test_disaggregated_table_shows_the_system_not_the_prefill_pool(capsys):
    main(
        [
            "simulate",
            "--disaggregated",
            "--prefill-replicas",
            "1",
            "--decode-replicas",
            "2",
            "--request-rate",
            "4",
            "--num-prompts",
            "40",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert "disaggregated: 1 x h100-sxm TP 1 prefill + 2 x h100-sxm TP 1 decode" in out
    assert "x1 replica(s)" not in out
    for row in ("GPUs (prefill + decode)", "mean batch: prefill / decode", "KV transfer mean (ms)"):
        assert row in out


def test_a_profile_fitted_at_a_compute_dtype_prices_the_run_at_its_peak(tmp_path, capsys):
    """``infercast machine``'s profile records ``compute = "fp32"``: an int4 run on a CPU file
    with a 4x faster bf16 line is then priced at the float32 peak, as ``compute = "fp32"`` in
    the config would; a config that names its compute dtype keeps it."""
    hw = tmp_path / "cpu.toml"
    hw.write_text(
        'name = "local-cpu"\nmemory_bytes = 2.5e10\nmemory_bandwidth_bytes_per_s = 4e10\n'
        "link_bandwidth_bytes_per_s = 0\nprice_per_hour = 0\n[flops_per_s]\nfp32 = 1.4e11\n"
        "bf16 = 5.3e11\n"
    )
    prof = tmp_path / "p.toml"
    body = "gemm_compute_eff = 0.7\nmem_bw_eff = 0.9\n"
    run = ["--model", "gemma-3-1b", "--hardware", str(hw), "--weights", "int4"]
    run += ["--concurrency", "2", "--num-requests", "20", "--no-progress", "--profile", str(prof)]
    conf = tmp_path / "sim.toml"

    def ttft(profile_compute: str, config_compute: str) -> float:
        prof.write_text(f"[profile]\n{profile_compute}{body}")
        conf.write_text(config_compute)
        return _json(capsys, [*run, "--config", str(conf)])["ttft_s"]["mean"]

    fitted = ttft('compute = "fp32"\n', "")
    assert fitted == pytest.approx(ttft("", 'compute = "fp32"\n'), rel=1e-12)
    assert fitted > 1.5 * ttft("", "")  # int4's default: the bf16 peak
    assert ttft('compute = "fp32"\n', 'compute = "bf16"\n') == pytest.approx(ttft("", ""))
