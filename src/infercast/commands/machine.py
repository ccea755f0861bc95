"""``infercast machine``: measure this machine and write a hardware profile."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("machine")
    def machine(
        output: Path = typer.Option(Path("local-cpu.toml"),
                                    help="Profile to write (.toml or .json)"),
        threads: int = typer.Option(1, help="BLAS threads to measure with (the engine's)"),
        runs: int = typer.Option(7, help="Timed runs per figure (median and best reported)"),
        as_json: bool = typer.Option(False, "--json", help="Print the measurements as JSON"),
    ) -> None:
        """Measure memory bandwidth and matmul FLOP/s; write a profile estimate/simulate accept."""
        import json
        import time

        from infercast.engine.machine_probe import probe, profile_mapping, to_toml
        from infercast.errors import ConfigError

        if output.suffix not in (".toml", ".json"):
            raise ConfigError(f"--output {output}: use a .toml or .json file name")
        if threads < 1 or runs < 1:
            raise ConfigError(f"--threads {threads} / --runs {runs}: both must be >= 1")
        result = probe(threads=threads, runs=runs)
        profile = profile_mapping(result)
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        comment = (f"Measured by `infercast machine` on {stamp} with {threads} BLAS thread(s): "
                   f"best of {runs} runs.\nmemory_bandwidth = best read rate (float32 dot "
                   "or matrix-vector); flops = dense matmul. Medians are in `infercast machine --json`.")
        output.write_text(json.dumps(profile, indent=2) + "\n" if output.suffix == ".json"
                          else to_toml(profile, comment))
        result["profile_path"] = str(output)
        if as_json:
            print(json.dumps(result, indent=2))
            return
        _print_table(result)


def _print_table(result: dict) -> None:
    from rich.table import Table

    from infercast.report.console import make_console

    table = Table(title=f"{result['name']}  (GB = 1e9 bytes)")
    for col in ("figure", "median", "best", "runs"):
        table.add_column(col, justify="right" if col != "figure" else "left")
    for key, m in result["measurements"].items():
        scale, unit = (1e9, "GB/s") if "bandwidth" in key else (1e9, "GFLOP/s")
        table.add_row(key, f"{m['median'] / scale:,.1f} {unit}", f"{m['best'] / scale:,.1f} {unit}",
                      str(m["runs"]))
    make_console().print(table)
    print(f"profile written to {result['profile_path']} (memory {result['memory_bytes'] / 1e9:.1f} GB)")
