"""What ``infercast validate`` prints: the headline, the error tables by a breakdown and by
set, the worst rows, the reasons rows were not predicted, simulator-vs-closed-form agreement
and the physics-floor check (``--json`` has all of it)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _table(title: str, stats: dict, label: str) -> Table:

    t = Table(title=title)
    # Medians lead; the mean, which a few assumed-layout rows dominate, comes last (--json has all).
    for col in (
        label,
        "rows",
        "predicted",
        "coverage",
        "median |err| %",
        "median signed %",
        "within 10%",
        "within 25%",
        "mean |err| %",
    ):
        t.add_column(col, justify="left" if col == label else "right")

    def f(x, pct=False):
        if x is None:
            return "-"
        return f"{100 * x:.0f}%" if pct else f"{x:.1f}"

    for key, s in stats.items():
        t.add_row(
            key,
            str(s["count"]),
            str(s["predicted"]),
            f(s["coverage"], True),
            f(s["median_abs_error_pct"]),
            f(s["median_signed_error_pct"]),
            f(s["within_10_pct"], True),
            f(s["within_25_pct"], True),
            f(s["mean_abs_error_pct"]),
        )
    return t


def headline(s: dict) -> str:
    """The first lines: the median error, and why the mean is larger when a few rows dominate it."""
    o, ok = s["overall"], s["nothing_assumed"]
    out = (
        f"median |error| {o['median_abs_error_pct']:.1f} % over {o['predicted']:,} predicted rows "
        f"({o['within_25_pct']:.0%} within 25 %); {ok['median_abs_error_pct']:.1f} % on the "
        f"{ok['predicted']:,} rows that state their weights and layout."
    )
    if (
        o["mean_abs_error_pct"] is not None
        and o["mean_abs_error_pct"] > 2 * o["median_abs_error_pct"]
    ):
        worst = s["worst"]
        assumed = sum(
            1
            for r in worst
            if r.get("assumed_weights") or any("assumed" in n for n in r.get("notes", []))
        )
        out += (
            f"\nThe mean ({o['mean_abs_error_pct']:.0f} %) is pulled up by a few rows: "
            f"{assumed} of the {len(worst)} worst assumed what their source did not state "
            "(worker counts, weight dtype); "
            "the 'why' column below says what each assumed."
        )
    return out


def fit_line(fit: dict) -> str | None:
    """The profile's own scores (its ``[fit]`` table, written by ``infercast calibrate``): the
    rows above are in sample for fitted rows, these say how the fit holds out; None without."""
    if "median_abs_error_after_pct" not in fit:
        return None
    parts = [f"in sample {fit['median_abs_error_after_pct']:.1f} %"]
    if "loso_median_of_held_out_median_abs_error_pct" in fit:
        parts.append(
            f"leave-one-source-out {fit['loso_median_of_held_out_median_abs_error_pct']:.1f} % "
            f"(median of {fit.get('loso_sources', '?')} sources held out)"
        )
    if "split_half_held_out_median_abs_error_pct" in fit:
        parts.append(f"split-half {fit['split_half_held_out_median_abs_error_pct']:.1f} %")
    where = f" on the {fit['path']}" if fit.get("path") else ""
    bounds = fit.get("at_bounds") or []
    return (
        f"the profile's fit ({fit.get('rows', '?')} fit rows, scored{where}): "
        + ", ".join(parts)
        + (f"; {len(bounds)} fields on a bound of their physical range" if bounds else "")
        + " (infercast calibrate; docs/calibration.md)"
    )


def print_report(rep: dict, by: str, console: Console, compare_fast: bool = False) -> None:
    """Rich tables: the chosen breakdown, overall, worst rows, skipped reasons, floor violations;
    with ``compare_fast`` the simulation's agreement with the closed form."""

    s = rep["summary"]
    console.print(headline(s))
    console.print(_table(f"infercast validate (profile {rep['profile']}) by {by}", s[by], by))
    sets = {"all rows": s["overall"]}
    if s["assumed_weights"]["count"]:
        sets["weights assumed (not stated)"] = s["assumed_weights"]
    if s["assumed_layout"]["count"]:
        sets["layout assumed (workers not stated, TP cannot shard heads, MTP not simulated)"] = s[
            "assumed_layout"
        ]
    if s["assumed_weights"]["count"] or s["assumed_layout"]["count"]:
        sets["nothing assumed"] = s["nothing_assumed"]
    console.print(_table("overall", sets, "set"))
    line = fit_line(rep.get("profile_fit") or {})
    if line:
        console.print(line)
    worst = Table(title="worst rows")
    for col in ("id", "scenario", "metric", "measured", "predicted", "error %", "why"):
        worst.add_column(col)
    for r in s["worst"]:
        why = "; ".join(n for n in r.get("notes", []) if "assumed" in n or "not stated" in n)
        if r.get("assumed_weights"):
            why = f"weights not stated: {r['assumed_weights']} assumed" + (
                f"; {why}" if why else ""
            )
        worst.add_row(
            r["id"],
            r["scenario"],
            r["metric"],
            f"{r['measured']:.4g}",
            f"{r['predicted']:.4g}",
            f"{r['error_pct']:+.0f}",
            why or "-",
        )
    console.print(worst)
    skipped = Table(title="rows not predicted (counted in coverage)")
    skipped.add_column("rows", justify="right")
    skipped.add_column("reason")
    for reason, n in list(s["skipped_reasons"].items())[:15]:
        skipped.add_row(str(n), reason)
    console.print(skipped)
    cross = s.get("simulation_vs_closed_form")
    if cross and compare_fast:
        agree = Table(title="simulation (default) vs closed form (--fast), rows predicted by both")
        for col in (
            "scenario / metric",
            "rows",
            "median sim / closed",
            "10-90 % of sim / closed",
            "median |err| sim",
            "median |err| closed",
        ):
            agree.add_column(col, justify="left" if col == "scenario / metric" else "right")
        for k, v in cross.items():
            agree.add_row(
                k,
                str(v["rows"]),
                f"{v['median_ratio']:.3f}",
                f"{v['p10_ratio']:.3f}-{v['p90_ratio']:.3f}",
                f"{v['median_abs_error_pct_sim']:.1f} %",
                f"{v['median_abs_error_pct_closed']:.1f} %",
            )
        console.print(agree)
    if "floor" in rep:
        fl = rep["floor"]
        console.print(
            f"physics floor: {fl['checked']} checks "
            "(rows, and closed-loop runs as TTFT + (O - 1) TPOT), "
            f"{len(fl['violations'])} beat the floor "
            + ", ".join(
                f"{v['id']} {v['metric']} ({v['ratio']:.2f}x)" for v in fl["violations"][:10]
            )
        )
