"""``infercast calibrate``: fit the cost model's efficiency profile to measurements."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts

HELP = (
    "Fit the efficiency profile (per hardware family and engine where the data allows) to "
    "measurements; write a profile TOML."
)
# Library parameters named otherwise than their flag (infercast.errors.with_flags).
PARAM_FLAGS = {"root": "--store"}
# [fit] keys the scores fill: --rescore replaces these and keeps the file's other [fit] entries
SCORE_KEYS = (
    "path",
    "rows",
    "median_abs_error_before_pct",
    "median_abs_error_after_pct",
    "at_bounds",
    "loso_sources",
    "loso_median_of_held_out_median_abs_error_pct",
    "split_half_held_out_median_abs_error_pct",
    "simulations",
)


def run_calibrate(
    data: str | None,
    out: str,
    groups: bool,
    cv: bool,
    min_group_rows: int,
    name: str,
    as_json: bool,
    fast: bool = False,
    rescore: str | None = None,
    workers: int | None = None,
    store: str | None = None,
) -> None:
    from pathlib import Path

    from infercast.commands._common import print_json
    from infercast.commands._progress import working
    from infercast.cost.profiles import ProfileSet, load_profile_set
    from infercast.errors import ConfigError
    from infercast.report.calibrate_tables import print_calibration
    from infercast.report.console import make_console
    from infercast.validate.calibrate import Calibrator, cross_validate, fit_profiles
    from infercast.validate.cases import load_cases
    from infercast.validate.simfit import SimulatedPath
    from infercast.validation import check_writable

    check_writable(out, "--out")

    if min_group_rows < 1:
        raise ConfigError(f"--min-group-rows must be >= 1, got {min_group_rows}")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    kept = load_profile_set(rescore) if rescore else None
    cases = load_cases(data)
    cal = Calibrator(cases, min_group_rows=min_group_rows)
    rows = cal.rows()
    if not len(rows):
        raise ConfigError(
            "no row of the data can be predicted in closed form: nothing to fit (see infercast "
            "validate)"
        )
    path = None
    if not fast:
        sims = None
        if store:
            from infercast.validate.simstore import SimStore

            sims = SimStore(store)
        path = SimulatedPath(cal, cases, workers=workers, store=sims)
    where = "closed forms" if fast else "simulated path"
    if kept is None:
        with working(f"fitting the efficiency profile to {len(rows):,} rows"):
            full = fit_profiles(cal, path, per_group=groups, name=name)
    else:
        full = kept
    with working(f"scoring on the {where}"):
        if path is None:
            before = cal.predict(ProfileSet(), rows)
            after = cal.predict(full, rows)
        else:
            before = path.predict(ProfileSet(), rows)
            after = path.predict(full, rows)
    with working("cross-validation: leave-one-source-out and split-half (one refit per fold)"):
        loso, split = cross_validate(cal, path, full, per_group=groups) if cv else ({}, {})
    held = [v["held_out_median_abs_error_pct"] for v in loso.values()]
    from infercast.validate.calibrate import _median_abs_pct

    fit = {
        "path": where,
        "rows": int(len(rows)),
        "median_abs_error_before_pct": _median_abs_pct(before, cal.measured[rows]),
        "median_abs_error_after_pct": _median_abs_pct(after, cal.measured[rows]),
        "at_bounds": cal.at_bounds(full),
    }
    if held:
        fit["loso_sources"] = len(held)
        fit["loso_median_of_held_out_median_abs_error_pct"] = sorted(held)[len(held) // 2]
    if split:
        fit["split_half_held_out_median_abs_error_pct"] = split["median_abs_error_pct"]
    if path is not None:
        fit["simulations"] = path.simulations
    if kept is None:
        fit = {"data": data or "shipped measurements.csv", **fit}
        fit["groups_fitted"] = sorted(full.groups)
    else:  # the file's values and provenance kept, its scores recomputed
        fit = {k: v for k, v in kept.fit.items() if k not in SCORE_KEYS} | fit
        fit["scores"] = f"recomputed by infercast calibrate --rescore, values kept from {rescore}"
    fitted = ProfileSet(full.default, full.groups, fit)
    Path(out).write_text(fitted.to_toml())
    if as_json:
        print_json(
            {
                "out": out,
                "fit": fit,
                "default": fitted.default.to_dict(),
                "groups": {k: v.to_dict() for k, v in fitted.groups.items()},
                "group_rows": {
                    g: int((cal.group_of[rows] == j).sum()) for j, g in enumerate(cal.ev.groups)
                },
                "leave_one_source_out": loso,
                "split_half": split,
            }
        )
        return
    print_calibration(fit, list(fitted.groups), loso, split, out, make_console())


def register(app: typer.Typer) -> None:
    @app.command("calibrate", help=HELP)
    def calibrate_cmd(
        data: opts.Data = None,
        out: str = typer.Option("profile.toml", "--out", "-o", help="profile TOML to write"),
        groups: bool = typer.Option(
            True, "--groups/--no-groups", help="also fit one profile per hardware family / engine"
        ),
        cv: bool = typer.Option(
            True, "--cv/--no-cv", help="leave-one-source-out and split-half cross-validation"
        ),
        min_group_rows: int = typer.Option(
            30, "--min-group-rows", help="rows a group needs for its own profile"
        ),
        name: str = typer.Option("calibrated", "--name", help="profile name written into the file"),
        as_json: opts.Json = False,
        fast: bool = typer.Option(
            False,
            "--fast",
            help="fit and score on the closed forms only (seconds); default: refit each group's "
            "serving overhead and score on the simulated path that infercast validate uses",
        ),
        rescore: str | None = typer.Option(
            None,
            "--rescore",
            help="keep this profile's values (shipped, builtin or a TOML) and recompute its [fit] "
            "scores: in sample, and the procedure's cross-validation",
        ),
        workers: opts.Workers = None,
        store: str | None = typer.Option(
            None,
            "--store",
            help="keep each simulated result in DIR (as infercast validate --store)",
        ),
    ) -> None:
        run_calibrate(
            data,
            out,
            groups,
            cv,
            min_group_rows,
            name,
            as_json,
            fast,
            rescore,
            workers,
            store,
        )
