"""``infercast models``: list the shipped model presets with parameter counts."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts


def register(app: typer.Typer) -> None:
    @app.command("models", help="List model presets: architecture, parameters, KV bytes per token.")
    def models_cmd(as_json: opts.JsonList = False) -> None:
        from infercast.commands._common import print_json
        from infercast.report.catalog_tables import models_table
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
        make_console().print(models_table(specs))
