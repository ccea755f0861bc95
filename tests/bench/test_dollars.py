"""Bench dollars (bench/dollars.py): GPUs x wall time x price, split by TTFT's share of the time."""

from types import SimpleNamespace

import pytest

from infercast.bench.dollars import bench_price, run_dollars
from infercast.errors import ConfigError


def test_run_dollars_by_hand():
    summary = SimpleNamespace(
        duration_s=360.0, total_input_tokens=1000, total_output_tokens=4000, completed=2
    )
    recs = [
        SimpleNamespace(ok=True, ttft_s=1.0, e2e_s=4.0),
        SimpleNamespace(ok=True, ttft_s=1.0, e2e_s=6.0),
        SimpleNamespace(ok=False, ttft_s=None, e2e_s=None),
    ]
    d = run_dollars(summary, recs, 4, 3.0)
    assert d["gpu_hours"] == pytest.approx(0.4) and d["usd"] == pytest.approx(1.2)
    assert d["usd_per_million_input_tokens"] == pytest.approx(1.2 * 0.2 / 1000 * 1e6)
    assert d["usd_per_million_output_tokens"] == pytest.approx(1.2 * 0.8 / 4000 * 1e6)


def test_price_comes_from_flag_or_table_and_rejects_negative():
    assert bench_price(None, 2.0) == (2.0, "--price")
    assert bench_price(None, None) == (None, "")
    assert bench_price("h100-sxm", None)[0] > 0
    with pytest.raises(ConfigError, match="`price`"):
        bench_price("h100-sxm", -1.0)
