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
    from infercast.report.validate_tables import print_report
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
