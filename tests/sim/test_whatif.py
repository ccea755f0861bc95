"""Quantization and TP what-ifs in ``simulate``: each lever against the baseline, under load."""

from __future__ import annotations

import json

from infercast.cli import main


def test_simulate_what_if_levers(capsys):
    main(
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--rate",
            "4",
            "--num-requests",
            "120",
            "--input-tokens",
            "512",
            "--output-tokens",
            "128",
            "--what-if",
            "--json",
        ]
    )
    rows = {r["lever"]: r for r in json.loads(capsys.readouterr().out)["what_if"]}
    assert set(rows) == {"baseline", "W4A16 int4 weights", "W8A8 fp8", "fp8 KV cache", "TP 2"}
    base = rows["baseline"]
    assert (
        rows["fp8 KV cache"]["num_kv_blocks"] >= 1.9 * base["num_kv_blocks"]
    )  # half the bytes per token
    # Light load: decode is memory-bound, so fewer weight bytes cut TPOT; INT4 keeps 16-bit compute.
    assert rows["W4A16 int4 weights"]["tpot_p99_s"] < 0.6 * base["tpot_p99_s"]
    assert (
        rows["W8A8 fp8"]["ttft_p99_s"] < rows["W4A16 int4 weights"]["ttft_p99_s"]
    )  # 8-bit peak in prefill
    assert rows["TP 2"]["num_gpus"] == 2 and rows["TP 2"]["tpot_p99_s"] < base["tpot_p99_s"]


def test_what_if_levers_use_the_runs_profile(capsys):
    # The baseline lever re-runs the run itself, so with --profile it must equal the run's own
    # numbers.
    main(
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--rate",
            "4",
            "--num-requests",
            "80",
            "--input-tokens",
            "512",
            "--output-tokens",
            "64",
            "--what-if",
            "--profile",
            "shipped",
            "--json",
        ]
    )
    d = json.loads(capsys.readouterr().out)
    base = next(r for r in d["what_if"] if r["lever"] == "baseline")
    assert base["tpot_p99_s"] == d["tpot_s"]["p99"] and base["ttft_p99_s"] == d["ttft_s"]["p99"]
