"""validate's first screen leads with the median and says why the mean is larger."""

from __future__ import annotations

from infercast.report.validate_tables import headline


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
