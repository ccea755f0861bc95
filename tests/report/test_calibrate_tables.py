"""report/calibrate_tables.py: calibrate's fit summary and its cross-validation table."""

from __future__ import annotations

from infercast.report.calibrate_tables import print_calibration

FIT = {
    "rows": 120,
    "median_abs_error_before_pct": 31.04,
    "median_abs_error_after_pct": 12.46,
    "at_bounds": [],
}
LOSO = {
    "paper-a": {
        "rows": 40,
        "in_sample_median_abs_error_pct": 11.0,
        "held_out_median_abs_error_pct": 17.25,
    }
}


def test_the_fit_then_each_held_out_source_then_the_profile(console):
    print_calibration(FIT, ["hopper/vllm"], LOSO, {"median_abs_error_pct": 14.0}, "p.toml", console)
    text = console.export_text()
    assert (
        "fitted on 120 rows, scored: median |error| 31.0% -> 12.5% (in sample); groups: hopper/vllm"
        in (" ".join(text.split()))
    )
    assert "paper-a" in text and "17.2" in text  # the held-out median, one decimal
    assert "split-half" in text and "14.0%" in text
    assert (
        "parameters on a bound of their physical range (a missing mechanism, to model): none"
        in (" ".join(text.split()))
    )
    assert "infercast validate --profile p.toml" in text


def test_without_cross_validation_there_is_no_table(console):
    print_calibration({**FIT, "at_bounds": ["mem_bw_eff"]}, [], {}, {}, "p.toml", console)
    text = console.export_text()
    assert "leave-one-source-out" not in text and "split-half" not in text
    assert "groups: none" in text and "mem_bw_eff" in text


def test_the_path_the_scores_were_computed_on_is_named(console):
    print_calibration({**FIT, "path": "simulated path"}, [], {}, {}, "p.toml", console)
    assert "fitted on 120 rows, scored on the simulated path:" in " ".join(
        console.export_text().split()
    )
