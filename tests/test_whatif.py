"""What-if levers: INT4 helps a memory-bound batch-1 decode, not a compute-bound prefill."""

from __future__ import annotations

import pytest

from infercast.estimate import estimate
from infercast.whatif import what_if


@pytest.fixture(scope="module")
def rows():
    base = estimate("llama-3.1-8b", "h100-sxm", batches=[1], context=1024, prompt=4096)
    return {w.lever: w.summary(1024) for w in what_if(base)}


def test_levers_present(rows):
    assert set(rows) == {"baseline", "W4A16 int4 weights", "W8A8 fp8", "fp8 KV cache", "TP 2"}


def test_int4_regimes(rows):
    base, int4, fp8 = rows["baseline"], rows["W4A16 int4 weights"], rows["W8A8 fp8"]
    assert int4["tpot_batch1_s"] < 0.45 * base["tpot_batch1_s"]  # 4-bit weights stream ~4x faster
    assert int4["ttft_s"] == pytest.approx(
        base["ttft_s"], rel=0.05
    )  # compute-bound prefill: no gain
    assert fp8["ttft_s"] < 0.75 * base["ttft_s"]  # W8A8 uses the 8-bit peak
    assert fp8["tpot_batch1_s"] < 0.65 * base["tpot_batch1_s"]


def test_fp8_kv_doubles_batch(rows):
    assert rows["fp8 KV cache"]["max_batch"] >= 1.9 * rows["baseline"]["max_batch"]


def test_what_if_table_keeps_its_columns_when_a_lever_fails():
    from rich.console import Console

    from infercast.report.tables import what_if_table

    ok = {
        "lever": "baseline",
        "weights": "bf16",
        "compute": "bf16",
        "kv_cache": "bf16",
        "tp": 1,
        "ttft_s": 0.1,
        "tpot_batch1_s": 0.01,
        "bound_batch1": "memory",
        "max_batch": 8,
        "tokens_per_s_max_batch": 800.0,
        "bound_max_batch": "memory",
        "tokens_per_s_per_gpu_max_batch": 800.0,
    }
    bad = {"lever": "2x TP", "error": "TP 2 splits 3 KV heads unevenly: " + "x" * 120}
    console = Console(width=120, record=True)
    console.print(what_if_table([ok, bad], 2048))
    text = console.export_text()
    rows = [
        line
        for line in text.splitlines()
        if line.startswith("│") and ("baseline" in line or "2x TP" in line)
    ]
    assert (
        len(rows) == 2 and abs(len(rows[0]) - len(rows[1])) <= 1
    )  # same columns, no mangled widths
    assert "not evaluated: 2x TP: TP 2 splits 3 KV heads unevenly" in text.replace("\n", " ")
