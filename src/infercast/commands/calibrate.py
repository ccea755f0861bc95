"""``infercast calibrate``: fit the cost model's efficiency profile to measurements."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts

HELP = (
    "Fit the efficiency profile (per hardware family and engine where the data allows) to "
    "measurements; write a profile TOML."
)


def run_calibrate(
    data: str | None,
    out: str,
    groups: bool,
    cv: bool,
    min_group_rows: int,
    name: str,
    as_json: bool,
) -> None:
    from pathlib import Path

    from infercast.commands._common import print_json
    from infercast.cost.profiles import ProfileSet
    from infercast.errors import ConfigError
    from infercast.report.calibrate_tables import print_calibration
    from infercast.report.console import make_console
    from infercast.validate.calibrate import Calibrator
    from infercast.validate.cases import load_cases
    from infercast.validation import check_writable

    check_writable(out, "--out")

    if min_group_rows < 1:
        raise ConfigError(f"--min-group-rows must be >= 1, got {min_group_rows}")
    cal = Calibrator(load_cases(data), min_group_rows=min_group_rows)
    if not len(cal.rows()):
        raise ConfigError(
            "no row of the data can be predicted in closed form: nothing to fit (see infercast "
            "validate)"
        )
    from infercast.commands._progress import working

    with working(f"fitting the efficiency profile to {len(cal.rows()):,} rows"):
        res = cal.fit(per_group=groups, name=name)
    with working("cross-validation: leave-one-source-out and split-half (one refit per fold)"):
        loso = cal.leave_one_source_out(per_group=groups) if cv else {}
        split = cal.split_half(per_group=groups) if cv else {}
    held = [v["held_out_median_abs_error_pct"] for v in loso.values()]
    at_bounds = cal.at_bounds(res.profiles)
    fit = {
        "data": data or "shipped measurements.csv",
        "rows": res.rows,
        "median_abs_error_before_pct": res.median_abs_error_before_pct,
        "median_abs_error_after_pct": res.median_abs_error_after_pct,
        "groups_fitted": sorted(res.profiles.groups),
        "at_bounds": at_bounds,
    }
    if held:
        fit["loso_sources"] = len(held)
        fit["loso_median_of_held_out_median_abs_error_pct"] = sorted(held)[len(held) // 2]
    if split:
        fit["split_half_held_out_median_abs_error_pct"] = split["median_abs_error_pct"]
    fitted = ProfileSet(res.profiles.default, res.profiles.groups, fit)
    Path(out).write_text(fitted.to_toml())
    if as_json:
        print_json(
            {
                "out": out,
                "fit": fit,
                "default": fitted.default.to_dict(),
                "groups": {k: v.to_dict() for k, v in fitted.groups.items()},
                "group_rows": res.group_rows,
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
    ) -> None:
        run_calibrate(data, out, groups, cv, min_group_rows, name, as_json)
