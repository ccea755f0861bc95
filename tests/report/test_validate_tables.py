"""validate's first screen leads with the median and says why the mean is larger."""

from __future__ import annotations

from infercast.report.validate_tables import fit_line, headline


def _stats(median, mean, n):
    return {
        "median_abs_error_pct": median,
        "mean_abs_error_pct": mean,
        "predicted": n,
        "within_25_pct": 0.55,
    }


def test_headline_leads_with_the_median_and_explains_a_large_mean():
    worst = [
        {
            "notes": ["worker counts not stated: 1 prefill + 1 decode worker assumed"],
            "assumed_weights": None,
        },
        {"notes": [], "assumed_weights": "bf16"},
        {"notes": [], "assumed_weights": None},
    ]
    text = headline(
        {
            "overall": _stats(20.8, 279.9, 3326),
            "nothing_assumed": _stats(13.8, 20.0, 2294),
            "worst": worst,
        }
    )
    assert text.startswith("median |error| 20.8 % over 3,326 predicted rows")
    assert "The mean (280 %) is pulled up by a few rows: 2 of the 3 worst assumed" in text


def test_no_explanation_when_the_mean_is_close_to_the_median():
    text = headline(
        {"overall": _stats(10.0, 12.0, 100), "nothing_assumed": _stats(9.0, 10.0, 80), "worst": []}
    )
    assert "pulled up" not in text


def test_fit_line_gives_the_profiles_held_out_scores():
    fit = {
        "path": "simulated path",
        "rows": 2047,
        "median_abs_error_after_pct": 14.23,
        "loso_sources": 10,
        "loso_median_of_held_out_median_abs_error_pct": 17.38,
        "split_half_held_out_median_abs_error_pct": 19.2,
        "at_bounds": ["a", "b"],
    }
    line = fit_line(fit)
    assert line.startswith("the profile's fit (2047 fit rows, scored on the simulated path): ")
    assert "in sample 14.2 %, leave-one-source-out 17.4 % (median of 10 sources held out)" in line
    assert "split-half 19.2 %; 2 fields on a bound" in line
    assert fit_line({}) is None  # a profile without [fit] scores (builtin, a hand-written file)
