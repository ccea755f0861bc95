"""The estimate command contract and its errors (one line on stderr, exit code 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_contract_keys(cli):
    code, out, _ = cli(
        [
            "estimate",
            "--model",
            "llama-3.1-70b",
            "--hardware",
            "h100-sxm",
            "--weights",
            "fp8",
            "--kv-cache",
            "fp8",
            "--batch",
            "1,8,32,64",
            "--context",
            "2048",
            "--prompt",
            "1024",
            "--json",
        ],
    )
    assert code in (0, None)
    d = json.loads(out)
    for key in ("total_params", "active_params", "kv_bytes_per_token"):
        assert key in d["model"]
    for key in ("fits", "required_bytes", "available_bytes", "max_batch"):
        assert key in d["memory"]
    for key in ("time_s", "floor_time_s", "bound"):
        assert key in d["prefill"]
    assert [row["batch"] for row in d["decode"]] == [1, 8, 32, 64]
    for row in d["decode"]:
        for key in (
            "batch",
            "context",
            "step_time_s",
            "floor_step_time_s",
            "tokens_per_s",
            "bound",
            "fits",
        ):
            assert key in row
    assert d["memory"]["fits"] is False
    assert d["decode"][0]["floor_step_time_s"] == pytest.approx(0.020847, rel=1e-3)


def test_tp2_and_floor_flag(cli):
    code, out, _ = cli(
        [
            "estimate",
            "--weights",
            "fp8",
            "--kv-cache",
            "fp8",
            "--batch",
            "64",
            "--tp",
            "2",
            "--floor",
            "--json",
        ],
    )
    d = json.loads(out)
    assert d["mode"] == "floor" and d["memory"]["fits"] is True
    row = d["decode"][0]
    assert row["tokens_per_s"] == pytest.approx(64 / row["floor_step_time_s"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (["estimate", "--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["estimate", "--hardware", "h900"], "unknown hardware 'h900'"),
        (["estimate", "--batch", "0"], "--batch values must be positive"),
        (["estimate", "--batch", "-4"], "--batch values must be positive"),
        (["estimate", "--weights", "fp7"], "unknown weights dtype 'fp7'"),
        (["estimate", "--kv-cache", "int3"], "unknown kv-cache dtype 'int3'"),
        (["estimate", "--context", "0"], "--context values must be positive"),
        (["estimate", "--context", "1k"], "--context expects comma-separated integers"),
        (["estimate", "--tp", "0"], "--tp must be a positive integer"),
        (
            ["estimate", "--model", "llama-3.1-8b", "--tp", "3"],
            "--tp 3 does not divide llama-3.1-8b's 32 attention heads",
        ),
    ],
)
def test_bad_input_one_line_exit_2(args, needle, cli):
    code, _, err = cli(args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_malformed_config_file(tmp_path, cli):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    code, _, err = cli(["estimate", "--model", str(bad)])
    assert code == 2 and "misses field" in err


def test_user_hardware_file(tmp_path, cli):
    spec = tmp_path / "part.toml"
    spec.write_text(
        'name = "my-part"\nmemory_bytes = 192e9\nmemory_bandwidth_bytes_per_s = 5e12\n'
        "link_bandwidth_bytes_per_s = 4e11\nprice_per_hour = 3.0\n[flops_per_s]\nbf16 = "
        "1.2e15\nfp8 = 2.4e15\n"
    )
    code, out, _ = cli(
        ["estimate", "--hardware", str(spec), "--model", "llama-3.1-8b", "--batch", "1", "--json"],
    )
    d = json.loads(out)
    assert d["hardware"]["name"] == "my-part" and d["cost"]["price_per_hour"] == 3.0
    spec.write_text('name = "x"\nmemory_bytes = 1e9\n')
    code, _, err = cli(["estimate", "--hardware", str(spec)])
    assert code == 2 and "memory_bandwidth_bytes_per_s" in err


def test_no_arguments_prints_the_seed_table():
    out = subprocess.run(
        [sys.executable, "-m", "infercast.cli"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "160", "PATH": ""},
    )
    assert out.returncode == 0, out.stderr
    assert "llama-3.1-70b" in out.stdout and "20.85" in out.stdout and "does not fit" in out.stdout


def test_hardware_and_models_lists(cli):
    code, out, _ = cli(["hardware", "--json"])
    keys = {h["key"] for h in json.loads(out)}
    assert {"h100-sxm", "h200-sxm", "b200", "mi300x"} <= keys
    code, out, _ = cli(["models", "--json"])
    assert len(json.loads(out)) == 40


def test_plot(tmp_path, cli):
    png = tmp_path / "roof.png"
    code, _, _ = cli(["estimate", "--plot", str(png), "--batch", "1,16"])
    assert png.stat().st_size > 10_000


def test_quickstart_tables_read_at_80_columns():
    # Nothing elided ("…") and no line wider than the terminal, for the seed case and a context
    # sweep.
    from rich.console import Console

    from infercast.estimate import estimate
    from infercast.report.tables import estimate_tables

    for est in (
        estimate("llama-3.1-70b", "h100-sxm", weights="fp8", kv_cache="fp8"),
        estimate("llama-3.1-8b", "h100-sxm", context=[1024, 8192]),
        estimate("mixtral-8x7b", "h200-sxm"),
    ):
        console = Console(width=80, record=True)
        console.print(estimate_tables(est))
        text = console.export_text()
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
        # the seed's back-of-envelope is a footnote for dense models, never a column
        assert " seed " not in text
        assert ("back-of-envelope" in text) == (not est.model.is_moe)
        # what would make the largest batch fit is in the table output, not only in --json
        assert ("to fit batch" in text) == (not all(d.fits for d in est.decode))


def test_compute_defaults_to_the_profiles_recorded_dtype(tmp_path, cli):
    """A profile ``infercast machine`` fitted records the peak it priced at (``compute``):
    estimate uses it unless ``--compute`` is given."""
    prof = tmp_path / "p.toml"
    prof.write_text('[profile]\nname = "cpu"\ncompute = "fp32"\nmem_bw_eff = 0.9\n')
    run = ["estimate", "--model", "llama-3.1-8b", "--weights", "int4", "--batch", "1", "--json"]
    run += ["--profile", str(prof)]
    assert json.loads(cli(run)[1])["precision"]["compute"] == "fp32"
    assert json.loads(cli([*run, "--compute", "bf16"])[1])["precision"]["compute"] == "bf16"
    prof.write_text('[profile]\nname = "cpu"\nmem_bw_eff = 0.9\n')
    assert json.loads(cli(run)[1])["precision"]["compute"] == "bf16"  # int4's default
