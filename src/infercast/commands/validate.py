"""``infercast validate``: every prediction scored against measured systems."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts

# Library parameters named otherwise than their flag (infercast.errors.with_flags).
PARAM_FLAGS = {"path": "--plot", "root": "--store"}

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
    fast: bool,
    floor: bool,
    assume_weights: str | None = "checkpoint",
    engine: str | None = None,
    compare_fast: bool = False,
    store: str | None = None,
) -> None:
    """``fast``: the closed forms of concurrency and disaggregated rows, the simulator only where
    no closed form exists (server, offline TTFT/ITL); else (the default) those rows too by
    simulation, the closed form kept beside each (``compare_fast`` prints the agreement).
    Offline throughput rows have only their closed form (steady state at the engine's limit)."""
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

    if fast and compare_fast:
        raise ConfigError("--fast and --compare-fast: choose one (--compare-fast simulates)")
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
    sims = None
    if store:
        from infercast.validate.simstore import SimStore

        sims = SimStore(store)
    from infercast.commands._progress import working

    with working(f"predicting {len(cases):,} measurements"):
        preds = Evaluator(
            cases,
            prefer_simulator=not fast,
            assume_weights=assume_weights,
            engine=preset,
            store=sims,
        ).predict(profiles)
        rep = report(preds, profiles.name, floor_report(cases) if floor else None)
        if profiles.fit:  # the profile's own scores, from infercast calibrate
            rep["profile_fit"] = dict(profiles.fit)
    if plot:
        from infercast.report.validate_plots import plot_predictions

        plot_predictions(preds, plot)
    if as_json:
        print_json(rep)
        return
    console = make_console()
    print_report(rep, by, console, compare_fast)
    if plot:
        console.print(f"plot written to {plot}")


def register(app: typer.Typer) -> None:
    @app.command("validate", help=HELP)
    def validate_cmd(
        data: opts.Data = None,
        profile: opts.Profile = None,
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
        fast: bool = typer.Option(
            False,
            "--fast",
            help="closed forms instead of the simulator for concurrency and disaggregated rows: "
            "seconds instead of minutes, not the validated default",
        ),
        compare_fast: bool = typer.Option(
            False,
            "--compare-fast",
            help="simulate (the default) and print how the closed forms of --fast agree with it",
        ),
        simulate_all: bool = typer.Option(
            False, "--simulate-all", hidden=True, help="the default now (kept as an alias)"
        ),
        store: str | None = typer.Option(
            None,
            "--store",
            help="keep each simulated result in DIR, keyed by a hash of its inputs and the "
            "package: a repeated run simulates only what changed",
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
        if simulate_all and fast:
            from infercast.errors import ConfigError

            raise ConfigError(
                "--simulate-all and --fast: choose one (--simulate-all is the default)"
            )
        run_validate(
            data,
            profile,
            as_json,
            plot,
            by,
            fast,
            floor,
            assume_weights,
            engine,
            compare_fast,
            store,
        )
