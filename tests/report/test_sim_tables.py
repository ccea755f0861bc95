"""report/sim_tables.py: simulate's what-if table (the run table: tests/commands/test_simulate)."""

from __future__ import annotations

from infercast.report.sim_tables import what_if_table

ROW = {
    "lever": "fp8 weights",
    "num_gpus": 1,
    "num_kv_blocks": 12000,
    "mean_batch_size": 12.34,
    "output_throughput_tokens_per_s": 2500.0,
    "output_throughput_per_gpu": 2500.0,
    "ttft_p99_s": 0.1234,
    "tpot_p99_s": 0.0123,
}


def test_a_lever_that_failed_keeps_its_row_and_its_reason_goes_under_the_table(render):
    table = what_if_table([ROW, {"lever": "tp 2", "error": "does not fit"}])
    text = render(table)
    assert "12,000" in text and "123.4" in text and "12.3" in text  # blocks, TTFT and TPOT in ms
    assert "not evaluated: tp 2: does not fit" in text
    assert table.row_count == 2
