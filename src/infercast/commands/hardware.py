"""``infercast hardware``: list the shipped accelerator presets."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts


def register(app: typer.Typer) -> None:
    @app.command(
        "hardware", help="List hardware presets (memory, bandwidth, peak FLOP/s, link, price)."
    )
    def hardware_cmd(
        as_json: opts.JsonList = False,
        show: str = typer.Option("", "--show", help="one part in full, with citations"),
        show_all: bool = typer.Option(
            False,
            "--all",
            help="also the parts kept only for measured rows (no bandwidth or no dense peak)",
        ),
    ) -> None:
        from infercast.commands._common import print_json
        from infercast.report.catalog_tables import hardware_table
        from infercast.report.console import make_console
        from infercast.specs.catalog import hardware_names, listed_hardware_names, load_hardware

        if show:
            h = load_hardware(show)
            data = {
                "key": h.key,
                "name": h.name,
                "memory_bytes": h.memory_bytes,
                "memory_bytes_datasheet": h.memory_bytes_spec or h.memory_bytes,
                "memory_bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
                "flops_per_s": dict(h.flops_per_s),
                "link_bandwidth_bytes_per_s": h.link_bandwidth_bytes_per_s,
                "price_per_hour": h.price_per_hour,
                "price_source": h.price_source,
                "citations": dict(h.citations),
            }
            print_json(data)
            return
        listed = listed_hardware_names()
        parts = [load_hardware(k) for k in (hardware_names() if show_all else listed)]
        if as_json:
            print_json(
                [
                    {
                        "key": h.key,
                        "name": h.name,
                        "memory_bytes": h.memory_bytes,
                        "memory_bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
                        "flops_per_s": dict(h.flops_per_s),
                        "price_per_hour": h.price_per_hour,
                    }
                    for h in parts
                ]
            )
            return
        make_console().print(hardware_table(parts))
        console = make_console()
        console.print(
            "Citations: infercast hardware --show KEY. Add a part: a TOML file (see "
            "docs/estimate.md)."
        )
        hidden = [k for k in hardware_names() if k not in listed]
        if hidden and not show_all:
            console.print(
                f"Not listed ({len(hidden)}; no bandwidth or no dense peak, kept for validate's "
                f"measured rows): {', '.join(hidden)}. --all shows them."
            )
