"""What ``infercast calibrate`` prints: the fit's error before and after, the leave-one-source-out
table, the split-half score, the parameters on a bound, and where the profile went."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def loso_table(loso: dict[str, dict]) -> Table:
    """One row per held-out source: its rows and median |error| in sample and held out."""
    t = Table(title="leave-one-source-out cross-validation (median |error| %)")
    for col in ("source", "rows", "in sample", "held out"):
        t.add_column(col, justify="left" if col == "source" else "right")
    for src, v in loso.items():
        t.add_row(
            src,
            str(v["rows"]),
            f"{v['in_sample_median_abs_error_pct']:.1f}",
            f"{v['held_out_median_abs_error_pct']:.1f}",
        )
    return t


def print_calibration(
    fit: dict,
    groups: list[str],
    loso: dict[str, dict],
    split: dict,
    out: str,
    console: Console,
) -> None:
    """The fit (``fit``: calibrate's summary dict), its cross-validation and the profile's path."""
    path = f" on the {fit['path']}" if fit.get("path") else ""
    console.print(
        f"fitted on {fit['rows']} rows, scored{path}: "
        f"median |error| {fit['median_abs_error_before_pct']:.1f}% -> "
        f"{fit['median_abs_error_after_pct']:.1f}% (in sample); "
        f"groups: {', '.join(sorted(groups)) or 'none'}"
    )
    if loso:
        console.print(loso_table(loso))
    if split:
        console.print(
            f"split-half: fit on alternate rows, scored on the others: median |error| "
            f"{split['median_abs_error_pct']:.1f}%"
        )
    at_bounds = fit["at_bounds"]
    console.print(
        "parameters on a bound of their physical range (a missing mechanism, to model): "
        + ("; ".join(at_bounds) if at_bounds else "none")
    )
    console.print(f"profile written to {out} (use: infercast validate --profile {out})")
