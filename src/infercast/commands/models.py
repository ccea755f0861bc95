"""``infercast models``: list the shipped model presets with parameter counts."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("models", help="List model presets: architecture, parameters, KV bytes per token.")
    def models_cmd(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
        from rich.table import Table

        from infercast.commands._common import print_json
        from infercast.report.console import make_console
        from infercast.specs.catalog import load_model, model_names

        specs = [load_model(n) for n in model_names()]
        if as_json:
            print_json(
                [
                    {
                        "name": m.name,
                        "arch": m.arch,
                        "total_params": m.total_params,
                        "active_params": m.active_params,
                        "num_layers": m.num_layers,
                        "kv_bytes_per_token_bf16": m.kv_bytes_per_token(2.0),
                    }
                    for m in specs
                ]
            )
            return
        t = Table(title="Model presets (any HF config.json path works too)")
        for col in (
            "name",
            "arch",
            "params (B)",
            "active (B)",
            "layers",
            "attention",
            "KV bytes/token (bf16)",
        ):
            t.add_column(col, justify="left" if col in ("name", "arch", "attention") else "right")
        for m in specs:
            a = m.attention
            kind = (
                "MLA"
                if a.kind == "mla"
                else (
                    "MHA"
                    if a.num_kv_heads == a.num_heads
                    else ("MQA" if a.num_kv_heads == 1 else f"GQA {a.num_heads}/{a.num_kv_heads}")
                )
            )
            if m.min_window != float("inf"):
                kind += f", window {int(m.min_window)}"
            t.add_row(
                m.name,
                m.arch,
                f"{m.total_params / 1e9:,.2f}",
                f"{m.active_params / 1e9:,.2f}",
                str(m.num_layers),
                kind,
                f"{m.kv_bytes_per_token(2.0):,.0f}",
            )
        make_console().print(t)
