"""``infercast machine``: measure this machine and write a hardware profile.

With ``--model`` it also measures the CPU engine's own rates on that model's
shapes (GEMM rate vs rows, attention, per-step overhead) and writes an
efficiency profile fitted to them next to the hardware profile, so that
``infercast estimate --hardware H --profile P`` predicts the engine.
"""

from __future__ import annotations

from pathlib import Path

import typer

HELP = (
    "Measure bandwidth, matmul FLOP/s and the engine's rates; write profiles "
    "estimate/simulate accept."
)


def register(app: typer.Typer) -> None:
    @app.command("machine", help=HELP)
    def machine(
        output: Path = typer.Option(
            Path("local-cpu.toml"), help="Hardware profile to write (.toml or .json)"
        ),
        threads: int = typer.Option(1, help="BLAS threads to measure with (the engine's)"),
        runs: int = typer.Option(7, help="Timed runs per figure (median and best reported)"),
        model: str = typer.Option(
            "100m",
            help="engine model whose shapes the efficiency profile is fitted on "
            "(tiny|100m|1b|smollm2-135m|PATH), or 'none' to skip it",
        ),
        profile_output: Path | None = typer.Option(
            None, help="efficiency profile to write (default: OUTPUT's stem + '-profile.toml')"
        ),
        rows: str = typer.Option(
            "1,4,8,16,32,64,67,128,131,512",  # engine.rate_probe.DEFAULT_ROWS (tested)
            help="GEMM row counts (tokens per step) to measure",
        ),
        weights: str = typer.Option(
            "fp32",
            help="weight format whose kernels the efficiency profile is fitted to "
            "(fp32|bf16|int8|q4: as `serve --weights`; the compact ones need torch; auto: "
            "the model file's own, per matrix, e.g. SmolLM2's 4-bit layers and int8 head)",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the measurements as JSON"),
    ) -> None:
        import json
        import time

        from infercast.engine.machine_probe import probe, profile_mapping, to_toml
        from infercast.engine.qlinear import WEIGHT_FORMATS
        from infercast.errors import ConfigError

        if output.suffix not in (".toml", ".json"):
            raise ConfigError(f"--output {output}: use a .toml or .json file name")
        if threads < 1 or runs < 1:
            raise ConfigError(f"--threads {threads} / --runs {runs}: both must be >= 1")
        row_counts = _parse_rows(rows)
        if weights not in ("auto", *WEIGHT_FORMATS):
            raise ConfigError(
                f"--weights {weights!r}: use auto or one of {', '.join(WEIGHT_FORMATS)}"
            )
        if weights not in ("auto", "fp32") and model != "none":
            from infercast.engine.qlinear import import_torch

            import_torch()  # the one-line install hint before minutes of measuring
        for path in (output, profile_output):
            if path is not None and not path.resolve().parent.is_dir():
                raise ConfigError(
                    f"--output/--profile-output {path}: folder {path.parent} does not exist"
                )
        cfg = tokenizer = None
        if model != "none":
            from infercast.engine.loader import describe

            cfg, tokenizer, formats = describe(model)
            if weights == "auto":  # the file's formats per matrix: `q4+int8` (layers, head)
                weights = formats
        from infercast.commands._progress import working

        with working(f"measuring memory bandwidth and matmul FLOP/s ({runs} runs each)"):
            result = probe(threads=threads, runs=runs)
        profile = profile_mapping(result)
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        comment = (
            f"Measured by `infercast machine` on {stamp} with {threads} BLAS thread(s): "
            f"best of {runs} runs.\nmemory_bandwidth = best read rate (float32 dot "
            "or matrix-vector); flops = dense matmul. Medians are in `infercast machine --json`."
        )
        output.write_text(
            json.dumps(profile, indent=2) + "\n"
            if output.suffix == ".json"
            else to_toml(profile, comment)
        )
        result["profile_path"] = str(output)
        if cfg is not None:
            path = profile_output or output.with_name(output.stem + "-profile.toml")
            result["engine"] = _engine_profile(
                cfg, result, row_counts, runs, threads, path, stamp, weights, tokenizer
            )
        if as_json:
            from infercast.commands._meta import with_meta

            print(json.dumps(with_meta(result), indent=2, default=str))
            return
        from infercast.report.console import make_console
        from infercast.report.machine_tables import print_machine

        print_machine(result, make_console())


def _parse_rows(rows: str) -> list[int]:
    from infercast.errors import ConfigError

    try:
        out = [int(x) for x in rows.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise ConfigError(
            f"--rows {rows!r}: give positive integers separated by commas, e.g. 1,8,32"
        )
    return out


def _engine_profile(
    cfg,
    result: dict,
    rows: list[int],
    runs: int,
    threads: int,
    path: Path,
    stamp: str,
    weights: str = "fp32",
    tokenizer=None,
) -> dict:
    """Measure the engine's rates and (with ``tokenizer``) the serving loop's own work, fit and
    write the efficiency profile; a JSON-ready summary."""
    import json

    from infercast.engine.machine_probe import stream_bytes
    from infercast.engine.predict import hardware_from_probe, precision, step_model
    from infercast.engine.profile_fit import fit_profile, profile_toml
    from infercast.engine.rate_probe import measure, widen_layer_s

    sm = step_model(cfg, hardware_from_probe(result), weights=weights)
    from infercast.commands._progress import working

    with working(f"measuring the engine's rates on {cfg.name}'s shapes ({len(rows)} row counts)"):
        points = measure(cfg, sm, rows, runs, threads, stream_bytes(), weights)
        widen = widen_layer_s(cfg, weights, runs, threads)
    fit = fit_profile(
        points,
        sm.machine,
        name=f"local-cpu engine ({cfg.name}, {weights})",
        widen_layer_s=widen,
        num_layers=cfg.num_layers,
    )
    serving = None
    if tokenizer is not None:
        from infercast.engine.profile_fit import with_serving
        from infercast.engine.serve_probe import measure as measure_serving

        with working("measuring the serving loop's work per step and per token"):
            serving = measure_serving(cfg, tokenizer, runs)
        fit = with_serving(fit, serving.step_s, serving.token_overhead_s, serving.admit_s)
    ratios = fit.ratios()
    compute = sm.machine.compute_dtype  # the peak the fit priced at; simulations default to it
    prec = precision(weights)  # the head's own format, when it has one, is recorded too
    comment = (
        f"Fitted by `infercast machine --model {cfg.name} --weights {weights}` on {stamp} "
        f"({threads} BLAS thread(s), best of {runs}) to the CPU engine's own products in\n"
        f"{weights}, attention and "
        f"per-step cost on {cfg.name}'s shapes"
        + (
            f", plus the serving loop's own work ({1e6 * serving.step_s:.0f} us a step, "
            f"{1e6 * serving.token_overhead_s:.0f} us a sampled token, "
            f"{1e6 * serving.admit_s:.0f} us to admit a request)"
            if serving is not None
            else ""
        )
        + (
            f"; widening the matrices to float32 in a step of more than "
            f"{fit.profile.widen_min_tokens:.0f} tokens: {1e3 * widen:.2f} ms a layer"
            if widen
            else ""
        )
        + ". GEMM points: measured (CPU)/predicted "
        f"{min(ratios):.2f}-{max(ratios):.2f}. Use with the hardware profile:\n"
        f"infercast estimate --model {path.stem}-model.json --hardware H --profile {path.name} "
        f"--weights {prec.weights} --kv-cache fp32 --compute {compute}"
    )
    path.write_text(profile_toml(fit, comment, compute, prec.head_weights))
    model_json = path.with_name(path.stem + "-model.json")
    model_json.write_text(json.dumps(cfg.to_hf_dict(), indent=2) + "\n")
    return {
        "weights": weights,
        "compute": compute,
        "head_weights": prec.head_weights,
        "profile_path": str(path),
        "model_config_path": str(model_json),
        "profile": fit.profile.to_dict(),
        "serving": serving.as_dict() if serving is not None else None,
        "widen_layer_s": widen,
        "points": [
            dict(p.as_dict(), predicted_s=t)
            for p, t in zip(fit.points, fit.predicted_s, strict=True)
        ],
    }
