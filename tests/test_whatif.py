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
    assert int4["ttft_s"] == pytest.approx(base["ttft_s"], rel=0.05)  # compute-bound prefill: no gain
    assert fp8["ttft_s"] < 0.75 * base["ttft_s"]  # W8A8 uses the 8-bit peak
    assert fp8["tpot_batch1_s"] < 0.65 * base["tpot_batch1_s"]


def test_fp8_kv_doubles_batch(rows):
    assert rows["fp8 KV cache"]["max_batch"] >= 1.9 * rows["baseline"]["max_batch"]
