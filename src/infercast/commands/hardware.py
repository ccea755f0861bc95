"""``infercast hardware``: list the shipped accelerator presets."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command(
        "hardware", help="List hardware presets (memory, bandwidth, peak FLOP/s, link, price)."
    )
    def hardware_cmd(
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
        show: str = typer.Option("", "--show", help="one part in full, with citations"),
        show_all: bool = typer.Option(
            False,
            "--all",
            help="also the parts kept only for measured rows (no bandwidth or no dense peak)",
        ),
    ) -> None:
        from rich.table import Table

        from infercast.commands._common import print_json
        from infercast.report.console import make_console
        from infercast.specs.catalog import hardware_names, listed_hardware_names, load_hardware
        from infercast.units import GB, GiB

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
        t = Table(title="Hardware presets (dense peaks, no sparsity; GB = 1e9 bytes)")
        for col in (
            "key",
            "name",
            "memory GB (GiB)",
            "TB/s",
            "bf16 TFLOP/s",
            "fp8 TFLOP/s",
            "fp4 TFLOP/s",
            "link GB/s",
            "$/h",
        ):
            t.add_column(col, justify="left" if col in ("key", "name") else "right")

        def tf(h, d):
            v = h.peak_flops(d)
            return f"{v / 1e12:,.0f}" if v else "-"

        for h in parts:
            mem = (
                f"{h.memory_bytes / GB:,.0f} ({h.memory_bytes / GiB:,.0f})"
                if h.memory_bytes
                else "-"
            )
            t.add_row(
                h.key,
                h.name,
                mem,
                f"{h.memory_bandwidth_bytes_per_s / 1e12:,.2f}"
                if h.memory_bandwidth_bytes_per_s
                else "-",
                tf(h, "bf16"),
                tf(h, "fp8"),
                tf(h, "fp4"),
                f"{h.link_bandwidth_bytes_per_s / 1e9:,.0f}"
                if h.link_bandwidth_bytes_per_s
                else "-",
                f"{h.price_per_hour:,.2f}" if h.price_per_hour else "-",
            )
        make_console().print(t)
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
