"""``infercast validate``: every prediction scored against measured systems."""

from __future__ import annotations

import typer

from infercast.commands._common import PROFILE_HELP

# Library parameters named otherwise than their flag (infercast.errors.with_flags).
PARAM_FLAGS = {"path": "--plot"}

HELP = (
    "Score predictions against published (or your own) measurements: per-row errors, summaries, "
    "floor check."
)


def _table(title: str, stats: dict, label: str):
    from rich.table import Table

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
            f"\nThe mean ({o['mean_abs_error_pct']:.0f} %) is pulled up by a few rows: {assumed} "
            f"of the {len(worst)} worst assumed what their source did not state (worker counts, "
            "weight dtype); the 'why' column below says what each assumed."
        )
    return out


def print_report(rep: dict, by: str, console) -> None:
    """Rich tables: the chosen breakdown, overall, worst rows, skipped reasons, floor violations."""
    from rich.table import Table

    s = rep["summary"]
    console.print(headline(s))
    console.print(_table(f"infercast validate (profile {rep['profile']}) by {by}", s[by], by))
    sets = {"all rows": s["overall"]}
    if s["assumed_weights"]["count"]:
        sets["weights assumed (not stated)"] = s["assumed_weights"]
    if s["assumed_layout"]["count"]:
        sets["layout assumed (workers not stated, or TP cannot shard heads)"] = s["assumed_layout"]
    if s["assumed_weights"]["count"] or s["assumed_layout"]["count"]:
        sets["nothing assumed"] = s["nothing_assumed"]
    console.print(_table("overall", sets, "set"))
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
    if cross:
        agree = Table(title="simulator vs closed form (rows predicted by both: --simulate-all)")
        for col in ("scenario / metric", "rows", "median sim / closed", "median |diff|"):
            agree.add_column(col)
        for k, v in cross.items():
            agree.add_row(
                k, str(v["rows"]), f"{v['median_ratio']:.3f}", f"{v['median_abs_diff_pct']:.1f} %"
            )
        console.print(agree)
    if "floor" in rep:
        fl = rep["floor"]
        console.print(
            f"physics floor: {fl['checked']} checks (rows, and closed-loop runs as TTFT + (O - 1) "
            f"TPOT), {len(fl['violations'])} beat the floor "
            + ", ".join(
                f"{v['id']} {v['metric']} ({v['ratio']:.2f}x)" for v in fl["violations"][:10]
            )
        )


def run_validate(
    data: str | None,
    profile: str | None,
    as_json: bool,
    plot: str | None,
    by: str,
    simulate_all: bool,
    floor: bool,
    assume_weights: str | None = "checkpoint",
    engine: str | None = None,
) -> None:
    from infercast.commands._common import print_json
    from infercast.cost.profiles import load_profile_set
    from infercast.errors import ConfigError
    from infercast.report.console import make_console
    from infercast.validate.cases import load_cases
    from infercast.validate.evaluate import Evaluator
    from infercast.validate.score import floor_report, report
    from infercast.validation import check_plot_path

    check_plot_path(plot, "--plot")

    choices = ("scenario", "metric", "scenario_metric", "hardware", "source", "group")
    if by not in choices:
        raise ConfigError(f"--by {by!r}: choose one of {', '.join(choices)}")
    if assume_weights == "none":
        assume_weights = None
    elif assume_weights != "checkpoint":
        from infercast.specs.precision import Precision

        assume_weights = Precision.parse(
            assume_weights
        ).weights  # an unknown dtype fails here, with the fix
    profiles = load_profile_set(profile)
    preset = None
    if engine:
        from infercast.specs.engines import load_engine

        preset = load_engine(engine)
    cases = load_cases(data)
    from infercast.commands._progress import working

    with working(f"predicting {len(cases):,} measurements"):
        preds = Evaluator(
            cases, prefer_simulator=simulate_all, assume_weights=assume_weights, engine=preset
        ).predict(profiles)
        rep = report(preds, profiles.name, floor_report(cases) if floor else None)
    if plot:
        from infercast.report.validate_plots import plot_predictions

        plot_predictions(preds, plot)
    if as_json:
        print_json(rep)
        return
    console = make_console()
    print_report(rep, by, console)
    if plot:
        console.print(f"plot written to {plot}")


def register(app: typer.Typer) -> None:
    @app.command("validate", help=HELP)
    def validate_cmd(
        data: str | None = typer.Option(
            None, "--data", help="measurement CSV (docs/validation.md); default: the shipped set"
        ),
        profile: str | None = typer.Option(None, "--profile", help=PROFILE_HELP),
        as_json: bool = typer.Option(
            False, "--json", help="print one JSON object (rows, summary, floor)"
        ),
        plot: str | None = typer.Option(
            None, "--plot", help="write predicted vs measured (log-log) to FILE.png"
        ),
        by: str = typer.Option(
            "scenario_metric",
            "--by",
            help="table breakdown: scenario, metric, scenario_metric, hardware, source, group",
        ),
        simulate_all: bool = typer.Option(
            False,
            "--simulate-all",
            help="use the simulator also for concurrency and disaggregated rows, with clients as "
            "the row's benchmark harness runs them (slower; reports agreement with the closed "
            "form)",
        ),
        floor: bool = typer.Option(
            True, "--floor/--no-floor", help="check that no measurement beats the physics floor"
        ),
        assume_weights: str = typer.Option(
            "checkpoint",
            "--assume-weights",
            help="weights of rows that state none: checkpoint (its config's dtype, marked per "
            "row), a dtype, or none (skip them)",
        ),
        engine: str | None = typer.Option(
            None,
            "--engine",
            help="predict every row on this engine preset (infercast engines; a name or a .toml): "
            "its limits, memory rule, policy and profile group; default: each row's own engine",
        ),
    ) -> None:
        run_validate(data, profile, as_json, plot, by, simulate_all, floor, assume_weights, engine)
