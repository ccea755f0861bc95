"""The bench command: JSON contract keys, sweeps, outputs, and one-line errors for bad flags."""

import json

import pytest
import typer
from typer.testing import CliRunner

from infercast.bench.mock import MockConfig
from infercast.bench.mock_http import run_in_thread
from infercast.commands import bench, mock_server
from infercast.errors import ConfigError

CONTRACT = (
    "completed",
    "failed",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "request_throughput",
    "output_throughput",
    "total_output_tokens",
    "duration",
    "token_count_source",
)


def app() -> typer.Typer:
    a = typer.Typer()
    bench.register(a)
    mock_server.register(a)
    return a


def test_json_contract_jsonl_and_plot(tmp_path):
    with run_in_thread(MockConfig(ttft_s=0.01, itl_s=0.002)) as (url, _):
        args = [
            "bench",
            "--base-url",
            url,
            "--model",
            "mock",
            "--concurrency",
            "2",
            "--num-requests",
            "6",
            "--input-tokens",
            "8",
            "--output-tokens",
            "5",
            "--json",
            "--jsonl",
            str(tmp_path / "r.jsonl"),
            "--plot",
            str(tmp_path / "p.png"),
        ]
        res = CliRunner().invoke(app(), args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(CONTRACT) <= out.keys()
    assert (
        out["completed"] == 6
        and out["total_output_tokens"] == 30
        and out["token_count_source"] == "usage"
    )
    assert (
        9.0 < out["mean_ttft_ms"] < 200.0
    )  # milliseconds (mock TTFT 10 ms; slack for a busy machine)
    # vLLM bench serve's identity keys and per-request arrays (TTFT and ITLs in seconds there)
    assert {
        "date",
        "backend",
        "model_id",
        "tokenizer_id",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "errors",
        "meta",
    } <= out.keys()
    assert out["model_id"] == "mock" and out["backend"] == "openai" and len(out["date"]) == 15
    assert out["output_lens"] == [5] * 6 and all(0.009 < t < 0.2 for t in out["ttfts"])
    assert [len(x) for x in out["itls"]] == [4] * 6 and out["errors"] == [""] * 6
    rows = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["token_count_source"] == "usage"
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_sweep_and_goodput_search():
    with run_in_thread(MockConfig(ttft_s=0.01, itl_s=0.002)) as (url, _):
        base = [
            "bench",
            "--base-url",
            url,
            "--model",
            "mock",
            "-n",
            "4",
            "--output-tokens",
            "3",
            "--json",
        ]
        sw = CliRunner().invoke(app(), [*base, "--concurrency", "1,2"], catch_exceptions=False)
        gp = CliRunner().invoke(
            app(), [*base, "--search-goodput", "50", "--slo-ttft-ms", "500"], catch_exceptions=False
        )
    assert [r["max_concurrency"] for r in json.loads(sw.stdout)["sweep"]] == [1, 2]
    # the mock answers in ~14 ms: the highest rate tried already meets a 500 ms TTFT limit
    assert json.loads(gp.stdout)["goodput_search"]["max_rate_meeting_slo"] == 50


@pytest.mark.parametrize(
    "args",
    [
        ["--request-rate", "abc"],
        ["--request-rate", "-1"],
        [],
        ["--concurrency", "1.5"],
        ["--concurrency", "0"],
        ["--endpoint", "x", "--concurrency", "1"],
    ],
)
def test_bad_flags_are_config_errors(args):
    with pytest.raises(ConfigError):
        app()(["bench", "--model", "m", *args], standalone_mode=False)


@pytest.mark.parametrize("args", [["--tokens-per-chunk", "0"], ["--ttft-ms", "-5"]])
def test_bad_mock_server_flags_are_config_errors(args):
    with pytest.raises(ConfigError):
        app()(["mock-server", *args], standalone_mode=False)


@pytest.mark.parametrize(
    "extra, why",
    [
        (
            ["--sim-hardware", "h100-sxm"],
            "unknown model 'smollm2-135m'",
        ),  # the engine's model is no simulator preset
        (
            [
                "--sim-hardware",
                "h100-sxm",
                "--sim-model",
                "llama-3.1-8b",
                "--sim-config",
                "missing.toml",
            ],
            "missing.toml",
        ),
        (["--sim-hardware", "h999", "--sim-model", "llama-3.1-8b"], "h999"),
    ],
)
def test_compare_sim_inputs_are_checked_before_the_benchmark(extra, why):
    # Nothing listens at this URL: an error about the simulator's input (not about the connection)
    # shows the check ran before any request was sent.
    args = [
        "bench",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "smollm2-135m",
        "--max-concurrency",
        "1",
        "-n",
        "2",
        "--compare-sim",
        *extra,
    ]
    with pytest.raises(Exception, match=why) as err:
        app()(args, standalone_mode=False)
    assert "connect" not in str(err.value).lower()
