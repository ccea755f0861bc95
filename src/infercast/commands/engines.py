"""``infercast engines``: the serving-engine presets (``--engine`` of estimate, simulate, plan,
bench, validate)."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts

HELP = (
    "List serving-engine presets (scheduling policy, limits, KV block, memory rule), each value "
    "cited."
)


def run_engines(show: str, as_json: bool) -> None:
    from infercast.commands._common import print_json
    from infercast.report.catalog_tables import engines_table
    from infercast.report.console import make_console
    from infercast.specs.engines import load_engine, shipped_presets

    if show:
        preset = load_engine(show)
        print_json({**preset.model_dump(mode="json"), "unmodelled": list(preset.unmodelled)})
        return
    presets = shipped_presets()
    if as_json:
        print_json(
            [
                {**p.model_dump(mode="json", exclude={"sources"}), "unmodelled": list(p.unmodelled)}
                for p in presets
            ]
        )
        return
    console = make_console()
    console.print(engines_table(presets))
    console.print(
        "Each value's source: infercast engines --show NAME. Use one: --engine NAME (or a family: "
        "vllm, sglang, trtllm, trtllm-engine; or your own preset .toml) on estimate, simulate, "
        "plan, bench --compare-sim and validate."
    )


def register(app: typer.Typer) -> None:
    @app.command("engines", help=HELP)
    def engines_cmd(
        show: str = typer.Option(
            "", "--show", help="one preset in full, with the source of every value"
        ),
        as_json: opts.JsonList = False,
    ) -> None:
        run_engines(show, as_json)
