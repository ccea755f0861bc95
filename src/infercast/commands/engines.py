"""``infercast engines``: the serving-engine presets (``--engine`` of estimate, simulate, plan,
bench, validate)."""

from __future__ import annotations

import typer

HELP = (
    "List serving-engine presets (scheduling policy, limits, KV block, memory rule), each value "
    "cited."
)


def run_engines(show: str, as_json: bool) -> None:
    from rich.table import Table

    from infercast.commands._common import print_json
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
    t = Table(title="Engine presets (base values; per-GPU and per-TP refinements: --show NAME)")
    for col in (
        "name",
        "policy",
        "seqs",
        "tokens/step",
        "chunk",
        "block",
        "memory",
        "preempt",
        "profile group",
    ):
        t.add_column(
            col,
            justify="left"
            if col in ("name", "policy", "memory", "preempt", "profile group")
            else "right",
        )
    for p in presets:
        t.add_row(
            p.name,
            p.policy,
            f"{p.max_num_seqs:,}",
            f"{p.max_num_batched_tokens:,}",
            f"{p.chunk_size:,}" if p.chunk_size else "whole",
            str(p.block_size),
            f"{p.memory_fraction:g} of {p.memory_rule}",
            p.preemption,
            p.profile_group,
        )
    console = make_console()
    console.print(t)
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
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
    ) -> None:
        run_engines(show, as_json)
