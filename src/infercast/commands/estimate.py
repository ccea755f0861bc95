"""``infercast estimate``: first-principles roofline of prefill and decode."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts
from infercast.cost.memory import DEFAULT_MEMORY_FRACTION

# Library parameters named otherwise than their flag (infercast.errors.with_flags).
PARAM_FLAGS = {"batches": "--batch", "price_per_hour": "--price", "path": "--plot"}

HELP = (
    "Roofline of prefill and decode: floor and expected times, bound, memory fit, max batch, "
    "tok/s, $/M tokens."
)


def run_estimate(
    model: str,
    hardware: str,
    weights: str,
    kv_cache: str | None,
    compute: str | None,
    batch: str | None,
    context: str | int,
    prompt: int,
    tp: int,
    pp: int,
    ep: int,
    price: float | None,
    profile: str | None,
    memory_fraction: float | None,
    floor: bool,
    as_json: bool,
    plot: str | None,
    ops: bool,
    what_if: bool = False,
    engine: str | None = None,
    experts: str | None = None,
) -> None:
    from infercast.commands._common import parse_int_list, print_json
    from infercast.cost.profiles import profile_compute, profile_head_weights, resolve_profile
    from infercast.estimate import EstimateRequest, estimate
    from infercast.report.console import make_console
    from infercast.report.tables import op_table, print_estimate
    from infercast.specs.catalog import load_hardware
    from infercast.specs.parallel import Parallelism
    from infercast.validation import check_plot_path

    check_plot_path(plot, "--plot")

    batches = parse_int_list(batch, "--batch") if batch is not None else [1, 8, 32, 64]
    contexts = parse_int_list(str(context), "--context")
    preset = None
    if engine:
        from infercast.specs.engines import load_engine

        preset = load_engine(engine)
    hw_key = load_hardware(hardware).key

    request = EstimateRequest(
        model,
        hardware,
        weights,
        kv_cache,
        compute or profile_compute(profile),  # a fitted profile's own peak (machine's fp32)
        batches,
        contexts,
        prompt,
        Parallelism(tp=tp, pp=pp, ep=ep),
        resolve_profile(profile, hw_key, preset.profile_group if preset else None),
        price,
        use_floor=floor,
        add_max_batch=batch is None,
        experts=experts,
        head_weights=profile_head_weights(profile),  # a fitted profile's head (machine's auto)
    )

    def run(fraction: float):
        return estimate(request, memory_fraction=fraction)

    if (
        memory_fraction is None and preset is not None
    ):  # the engine's memory rule, on this model and part
        from infercast.sim.build import engine_memory_fraction

        memory_fraction = engine_memory_fraction(preset, run(1.0).step_model)
    est = run(DEFAULT_MEMORY_FRACTION if memory_fraction is None else memory_fraction)
    if plot:
        from infercast.report.plots import plot_estimate

        plot_estimate(est, plot)
    levers = None
    if what_if:
        from infercast.whatif import what_if as run_what_if

        levers = [w.summary(est.context) for w in run_what_if(est)]
    if as_json:
        data = est.to_dict()
        if levers is not None:
            data["what_if"] = levers
        print_json(data)
        return
    console = make_console()
    print_estimate(est, console)
    if ops:
        console.print(op_table(est, est.decode[-1].batch))
    if levers is not None:
        from infercast.report.tables import what_if_table

        console.print(what_if_table(levers, est.context))
    if plot:
        console.print(f"plot written to {plot}")


def run_default() -> None:
    """``infercast`` with no arguments: the seed case (Llama-3.1-70B, FP8 weights and KV, one
    H100 SXM)."""
    from infercast.estimate import SEED

    run_estimate(
        SEED["model"],
        SEED["hardware"],
        SEED["weights"],
        SEED["kv_cache"],
        None,
        ",".join(map(str, SEED["batches"])),
        SEED["context"],
        SEED["prompt"],
        1,
        1,
        1,
        None,
        None,
        DEFAULT_MEMORY_FRACTION,
        False,
        False,
        None,
        False,
    )


def register(app: typer.Typer) -> None:
    @app.command("estimate", help=HELP)
    def estimate_cmd(
        model: str = typer.Option(
            "llama-3.1-70b",
            "--model",
            "-m",
            help="preset name (infercast models) or path to config.json / model dir",
        ),
        hardware: str = typer.Option(
            "h100-sxm",
            "--hardware",
            "-H",
            help="preset key (infercast hardware) or a .toml/.json spec",
        ),
        weights: str = typer.Option(
            "checkpoint",
            help="weight storage dtype: fp32 bf16 fp16 fp8 int8 int4 fp4, or checkpoint (as the "
            "model's config.json ships it)",
        ),
        experts: str | None = typer.Option(
            None,
            "--experts",
            help="routed experts' own precision <format>/<compute>, e.g. mxfp4/bf16 or mxfp4/fp8; "
            "none = the weights' dtype (default: what --weights implies)",
        ),
        kv_cache: opts.KvCache = None,
        compute: str | None = typer.Option(
            None,
            help="matmul compute dtype (default: the --profile file's recorded one, else from "
            "weights: int4 -> bf16)",
        ),
        batch: str | None = typer.Option(
            None, help="decode batch sizes, e.g. 1,8,32,64 (default adds the max batch)"
        ),
        context: str = typer.Option(
            "2048", help="tokens in context per sequence during decode, e.g. 2048 or 1024,8192"
        ),
        prompt: int = typer.Option(1024, help="prompt tokens for the prefill / TTFT estimate"),
        tp: int = typer.Option(1, help="tensor-parallel GPUs"),
        pp: int = typer.Option(1, help="pipeline-parallel stages"),
        ep: int = typer.Option(1, help="expert-parallel size (MoE)"),
        price: float | None = typer.Option(
            None, help="$/GPU-hour (default: median quote in prices.csv)"
        ),
        profile: opts.Profile = None,
        engine: opts.Engine = None,
        memory_fraction: float | None = typer.Option(
            None,
            help="fraction of device memory the engine may use "
            f"(default: {DEFAULT_MEMORY_FRACTION:g}, or --engine's memory rule)",
        ),
        floor: bool = typer.Option(
            False, "--floor", help="report physics floors as the main numbers"
        ),
        as_json: opts.Json = False,
        plot: str | None = typer.Option(
            None, help="write roofline + throughput plot (PNG/SVG/PDF)"
        ),
        ops: bool = typer.Option(
            False, "--ops", help="also print the per-op ledger of the largest batch"
        ),
        what_if: bool = typer.Option(
            False, "--what-if", help="compare levers: int4 / fp8 weights, fp8 KV, 2x TP"
        ),
    ) -> None:
        run_estimate(
            model,
            hardware,
            weights,
            kv_cache,
            compute,
            batch,
            context,
            prompt,
            tp,
            pp,
            ep,
            price,
            profile,
            memory_fraction,
            floor,
            as_json,
            plot,
            ops,
            what_if,
            engine,
            experts,
        )
