"""``infercast plan``: the cheapest configuration meeting a TTFT/TPOT SLO at a request rate."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts

# Library parameters named otherwise than their flag (infercast.errors.with_flags).
PARAM_FLAGS = {
    "precisions": "--precision",
    "slo_ttft_p99_s": "--slo-ttft-ms",
    "slo_tpot_p99_s": "--slo-tpot-ms",
    "tps": "--tp",
    "prices": "--price",
}

HELP = (
    "Search part x GPUs x TP x precision x batch cap x chunk x speculative x disaggregation "
    "for the cheapest configuration meeting a p99 TTFT/TPOT SLO at a rate (simulated)."
)


def _pairs(text: str, flag: str, sep: str) -> tuple[tuple[str, str], ...]:
    from infercast.errors import ConfigError

    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if sep not in part:
            raise ConfigError(
                f"{flag} expects items like a{sep}b separated by commas, got {part!r}"
            )
        a, b = part.split(sep, 1)
        out.append((a.strip(), b.strip()))
    return tuple(out)


def _precisions(model: str, pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``checkpoint/KV`` (the model as it ships, specs/checkpoint.py) is dropped where it repeats
    another pair: a BF16 or FP8 checkpoint without experts of their own is that pair already."""
    from infercast.specs.checkpoint import checkpoint_expert_format, checkpoint_weights

    same = None if checkpoint_expert_format(model) else (checkpoint_weights(model) or "bf16")
    out = [(w, kv) for w, kv in pairs if not (w.lower() == "checkpoint" and (same, kv) in pairs)]
    return tuple(dict.fromkeys(out))


def _vocabulary(o: dict) -> dict:
    """Old flag names (hidden) folded into the new ones: ``--rate``, ``--num-requests``, SLOs in
    seconds."""
    from infercast.commands._common import renamed
    from infercast.errors import ConfigError

    o["rate"] = renamed(o["rate"], o.pop("rate_old"), "--request-rate", "--rate")
    n = renamed(o["num_requests"], o.pop("num_requests_old"), "--num-prompts", "--num-requests")
    o["num_requests"] = 300 if n is None else n  # 0 is a bad value for the checks, not "default"
    for name in ("ttft", "tpot"):
        ms = o.pop(f"slo_{name}_ms")
        o[f"slo_{name}_p99"] = renamed(
            None if ms is None else ms / 1e3,
            o[f"slo_{name}_p99"],
            f"--slo-{name}-ms",
            f"--slo-{name}-p99",
        )
    missing = [
        f
        for f, k in (
            ("--request-rate", "rate"),
            ("--slo-ttft-ms", "slo_ttft_p99"),
            ("--slo-tpot-ms", "slo_tpot_p99"),
        )
        if o[k] is None
    ]
    if missing:
        raise ConfigError(
            f"plan needs {', '.join(missing)}, e.g. --request-rate 10 --slo-ttft-ms 2000 "
            "--slo-tpot-ms 50"
        )
    return o


def build_request(o: dict):
    """Flags -> a validated :class:`~infercast.plan.PlanRequest`."""
    from infercast.commands._common import parse_int_list
    from infercast.cost.profiles import load_profile_set
    from infercast.errors import ConfigError
    from infercast.plan import PlanRequest

    load_profile_set(o["profile"])  # a bad --profile or --engine fails here, before the search
    if o["engine"]:
        from infercast.specs.engines import load_engine

        load_engine(o["engine"])

    ratios: tuple = ()
    if o["disagg_ratios"] and o["disagg_ratios"] != "none":
        try:
            ratios = tuple(
                (int(a), int(b)) for a, b in _pairs(o["disagg_ratios"], "--disagg-ratios", ":")
            )
        except ValueError:
            raise ConfigError(
                f"--disagg-ratios expects P:D integer pairs, got {o['disagg_ratios']!r}"
            ) from None
    try:
        prices = (
            tuple((k, float(v)) for k, v in _pairs(o["price"], "--price", "="))
            if o["price"]
            else ()
        )
    except ValueError:
        raise ConfigError(f"--price expects part=dollars pairs, got {o['price']!r}") from None
    from infercast.commands.simulate import lever_sections

    # LoRA is not modelled with speculative decoding or disaggregation: those levers are not tried
    levers = {
        k: {a: b for a, b in v.items() if b is not None} for k, v in lever_sections(o).items()
    }
    levers.pop(
        "kv_offload", None
    )  # plan's workloads have no shared prefixes for a host tier to keep
    if levers:  # a bad value fails here, naming its field, before the search
        from infercast.sim.build import step_model
        from infercast.sim.config import build_config

        step_model(
            build_config(
                {"model": o["model"], "hardware": o["hardware"].split(",")[0].strip(), **levers}
            )
        )
    return PlanRequest(
        model=o["model"],
        hardware=tuple(h.strip() for h in o["hardware"].split(",") if h.strip()),
        rate=o["rate"],
        slo_ttft_p99_s=o["slo_ttft_p99"],
        slo_tpot_p99_s=o["slo_tpot_p99"],
        trace=o["trace"],
        input_tokens=o["input_tokens"],
        output_tokens=o["output_tokens"],
        num_requests=o["num_requests"],
        seed=o["seed"],
        max_gpus=o["max_gpus"],
        prices=prices,
        tps=tuple(parse_int_list(o["tp"], "--tp")),
        precisions=_precisions(o["model"], _pairs(o["precision"], "--precision", "/")),
        batch_caps=tuple(parse_int_list(o["batch_caps"], "--batch-caps")),
        chunks=tuple(parse_int_list(o["chunks"], "--chunks")),
        speculative=(False, True) if o["speculative"] and "lora" not in levers else (False,),
        acceptance=o["acceptance"],
        disagg_ratios=() if "lora" in levers else ratios,
        top_k=o["top_k"],
        exhaustive=o["exhaustive"],
        objective=o["objective"],
        profile=o["profile"],
        engine=o["engine"],
        levers=tuple((k, tuple(sorted(v.items()))) for k, v in sorted(levers.items())),
    )


def run_plan(o: dict) -> None:
    from infercast.commands._common import print_json
    from infercast.commands._progress import working
    from infercast.errors import ConfigError
    from infercast.plan import pareto_frontier, pareto_points, plan
    from infercast.plan.executors import default_executor
    from infercast.validation import check_int, check_plot_path

    check_plot_path(o["plot"], "--plot")
    if o["workers"] is not None:
        check_int(o["workers"], "--workers", 1, fix="give at least 1 process")
    check_int(o["top_k"], "--top-k", 1, fix="give at least 1 leader")
    check_int(o["alternatives"], "--alternatives", 0, fix="give 0 or more")
    if o["executor"] is not None and o["executor"] not in ("local", "serial", "ray"):
        raise ConfigError(f"--executor {o['executor']!r}: use local, serial or ray")

    req = build_request(o)
    with working(f"searching configurations on {', '.join(req.hardware)}"):
        result = plan(
            req,
            o["executor"] or default_executor(),
            o["workers"],
            o["cache_dir"],
            o["alternatives"],
        )
    if o["plot"]:
        from infercast.report.plan_plots import plot_pareto

        plot_pareto(result, o["plot"])
    d = result.to_dict()
    d["pareto_frontier"] = pareto_frontier(pareto_points(result))
    if o["as_json"]:
        print_json(d)
        return
    from infercast.report.console import make_console
    from infercast.report.plan_tables import print_plan

    print_plan(d, make_console())


def register(app: typer.Typer) -> None:
    @app.command("plan", help=HELP)
    def plan_cmd(
        model: str = typer.Option(..., "--model", "-m", help="preset name or config.json path"),
        hardware: str = typer.Option(
            "h100-sxm", "--hardware", "-H", help="candidate parts, comma-separated"
        ),
        rate: float | None = typer.Option(
            None, "--request-rate", help="requests/s to serve (required)"
        ),
        slo_ttft_ms: float | None = typer.Option(
            None, "--slo-ttft-ms", help="p99 TTFT limit (ms, required)"
        ),
        slo_tpot_ms: float | None = typer.Option(
            None, "--slo-tpot-ms", help="p99 TPOT limit (ms, required)"
        ),
        rate_old: float | None = typer.Option(None, "--rate", hidden=True),
        slo_ttft_p99: float | None = typer.Option(None, "--slo-ttft-p99", hidden=True),
        slo_tpot_p99: float | None = typer.Option(None, "--slo-tpot-p99", hidden=True),
        trace: str | None = typer.Option(
            None, help="request lengths: azure-conv | azure-code | CSV/JSONL"
        ),
        input_tokens: int | None = typer.Option(None, help="prompt length (instead of --trace)"),
        output_tokens: int | None = typer.Option(None, help="output length (instead of --trace)"),
        tp: str = typer.Option("1,2,4,8", help="TP sizes to try"),
        precision: str = typer.Option(
            "checkpoint/bf16,bf16/bf16,fp8/bf16,fp8/fp8",
            help="weights/KV dtype pairs to try; checkpoint = as the model ships (gpt-oss: MXFP4 "
            "experts)",
        ),
        batch_caps: str = typer.Option("64,256", help="max_num_seqs values to try"),
        chunks: str = typer.Option(
            "2048,8192", help="max_num_batched_tokens (chunk) values to try"
        ),
        speculative: bool = typer.Option(
            True, "--speculative/--no-speculative", help="try EAGLE speculative decoding"
        ),
        acceptance: float = typer.Option(0.7, help="assumed mean draft acceptance rate"),
        disagg_ratios: str = typer.Option(
            "1:1,1:2,2:1", help="P:D replica ratios to try, or 'none'"
        ),
        num_requests: int | None = typer.Option(
            None, "--num-prompts", help="requests per simulation (default: 300)"
        ),
        num_requests_old: opts.OldNumRequests = None,
        seed: int = typer.Option(0, help="random seed"),
        max_gpus: int = typer.Option(64, help="largest fleet considered"),
        price: str | None = typer.Option(None, help="$/GPU-hour overrides: h100-sxm=2.5,b200=5"),
        executor: str | None = typer.Option(
            None, help="local (process pool) | serial | ray (default: ray if RAY_ADDRESS)"
        ),
        workers: opts.Workers = None,
        cache_dir: str | None = typer.Option(None, help="directory caching each evaluation"),
        exhaustive: bool = typer.Option(
            False, "--exhaustive", help="full product instead of two stages"
        ),
        top_k: int = typer.Option(3, help="stage-1 leaders whose levers stage 2 tries"),
        alternatives: int = typer.Option(5, help="runner-up configurations to list"),
        as_json: opts.Json = False,
        plot: str | None = typer.Option(
            None, "--plot", help="Pareto frontier PNG (throughput/GPU vs tokens/s/user)"
        ),
        objective: str = typer.Option(
            "cost",
            "--objective",
            help="rank configurations meeting the SLO by cost ($/hour) or energy (J per output "
            "token)",
        ),
        expert_skew: float | None = typer.Option(
            None, "--expert-skew", help="MoE routing skew every candidate serves: Zipf exponent"
        ),
        expert_loads: str | None = typer.Option(
            None, "--expert-loads", help="MoE routing: CSV of expert,load"
        ),
        redundant_experts: int | None = typer.Option(
            None, "--redundant-experts", help="EPLB redundant expert slots (default: 0)"
        ),
        lora_rank: int | None = typer.Option(
            None,
            "--lora-rank",
            help="serve LoRA adapters of this rank (no speculative or disaggregated candidates)",
        ),
        lora_targets: str | None = typer.Option(
            None, "--lora-targets", help="LoRA targets (default: attn)"
        ),
        lora_adapters: int | None = typer.Option(
            None, "--lora-adapters", help="distinct adapters in the workload (default: 1)"
        ),
        lora_slots: int | None = typer.Option(
            None, "--lora-slots", help="adapters resident per GPU (default: all)"
        ),
        profile: opts.Profile = None,
        engine: opts.Engine = None,
    ) -> None:
        run_plan(_vocabulary(dict(locals())))
