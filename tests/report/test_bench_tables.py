"""report/bench_tables.py: a bench run's dollars line and the measured-vs-simulated table."""

from __future__ import annotations

from infercast.report.bench_tables import comparison_table, dollars_line

DOLLARS = {
    "gpus": 2,
    "price_per_gpu_hour": 2.5,
    "price_source": "--price",
    "gpu_hours": 0.0125,
    "usd_per_hour": 5.0,
    "usd": 0.03125,
    "usd_per_million_input_tokens": 0.2,
    "usd_per_million_output_tokens": None,
}


def test_dollars_line_reads_as_one_sentence():
    line = dollars_line(DOLLARS)
    assert line.startswith("cost: 2 GPU x $2.50/GPU-hour (--price): 0.0125 GPU-hours, $5.000/hour")
    assert "$0.031 for the run" in line and "in $0.200, out -" in line


def test_comparison_rows_show_dashes_for_what_was_not_measured(render):
    rows = [
        {
            "metric": "TTFT mean (ms)",
            "measured": 100.0,
            "predicted": 110.0,
            "predicted_over_measured": 1.1,
        },
        {
            "metric": "prefix hit rate, tokens (%)",
            "measured": None,
            "predicted": 50.0,
            "predicted_over_measured": None,
        },
    ]
    text = render(comparison_table(rows, "sim x"))
    assert "measured vs simulated (sim x)" in text and "110.00" in text and "1.10" in text
    assert "-" in text.split("prefix hit rate, tokens (%)")[1].splitlines()[0]
