"""``infercast simulate``: discrete-event simulation of a serving engine under a workload."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts

HELP = (
    "Simulate a serving engine (scheduler + paged KV + cost model) under a workload: "
    "TTFT/TPOT/ITL/E2E, throughput, goodput."
)


def _overrides(o: dict) -> dict:
    """Flag values -> the nested config layout (None = not given, file or default wins)."""
    length = {
        "input": {"dist": o["input_dist"], "mean": o["input_tokens"], "std": o["input_std"]},
        "output": {"dist": o["output_dist"], "mean": o["output_tokens"], "std": o["output_std"]},
    }
    out = {
        "model": o["model"],
        "hardware": o["hardware"],
        "weights": o["weights"],
        "experts": o["experts"],
        "kv_cache": o["kv_cache"],
        "tp": o["tp"],
        "ep": o["ep"],
        "attn_dp": o["attn_dp"],
        "replicas": o["replicas"],
        "router": o["router"],
        "seed": o["seed"],
        "mode": o["mode"],
        "slo_ttft_s": o["slo_ttft_s"],
        "slo_tpot_s": o["slo_tpot_s"],
        "scheduler": {
            "policy": o["scheduler"],
            "max_num_seqs": o["max_num_seqs"],
            "max_num_batched_tokens": o["max_num_batched_tokens"],
            "block_size": o["block_size"],
            "num_blocks": o["num_blocks"],
            "prefix_caching": o["prefix_caching"],
            "max_model_len": o["max_model_len"],
        },
        "workload": {
            "arrival": o["workload"],
            "cv": o["cv"],
            "concurrency": o["concurrency"],
            "num_requests": o["num_requests"],
            "trace": o["trace"],
            "prefix_groups": o["prefix_groups"],
            "prefix_tokens": o["prefix_tokens"],
            "conversations": o["conversations"],
            "turns": o["turns"],
            "think_time_s": o["think_time_s"],
            **length,
        },
    }
    spec = {
        "method": o["speculative"],
        "num_speculative_tokens": o["num_speculative_tokens"],
        "acceptance": o["acceptance"],
        "acceptance_std": o["acceptance_std"],
        "draft_model": o["draft_model"],
    }
    if any(v is not None for v in spec.values()):  # an empty section would switch it on
        out["speculative"] = spec
    pools = {
        name: {
            "hardware": o[f"{name}_hardware"],
            "replicas": o[f"{name}_replicas"],
            "tp": o[f"{name}_tp"],
        }
        for name in ("prefill", "decode")
    }
    disagg = {
        "transfer_bandwidth_bytes_per_s": o["transfer_bandwidth"],
        "transfer_latency_s": o["transfer_latency_s"],
        "layer_overlap": o["layer_overlap"],
        **pools,
    }
    out.update(lever_sections(o))
    if o["disaggregated"] or any(v is not None for p in pools.values() for v in p.values()):
        out["disaggregation"] = disagg
    else:
        for flag, key in (
            ("--transfer-bandwidth", "transfer_bandwidth"),
            ("--transfer-latency-s", "transfer_latency_s"),
        ):
            if o[key] is not None:  # a value that would be silently ignored
                from infercast.errors import ConfigError

                raise ConfigError(
                    f"{flag} applies to disaggregated runs: add --disaggregated (or drop it)"
                )
    return out


def lever_sections(o: dict) -> dict:
    """``[kv_offload]``, ``[expert_routing]``, ``[lora]`` from their flags (a section only when
    one of its flags is given: an empty one would switch the lever on)."""
    sections = {
        "kv_offload": {
            "gib": o.get("kv_offload_gib"),
            "host_link_gbps": o.get("host_link_gbps"),
            "overlap": o.get("kv_offload_overlap"),
        },
        "expert_routing": {
            "skew": o["expert_skew"],
            "loads": o["expert_loads"],
            "redundant": o["redundant_experts"],
        },
        "lora": {
            "rank": o["lora_rank"],
            "targets": o["lora_targets"],
            "adapters": o["lora_adapters"],
            "slots": o["lora_slots"],
        },
    }
    return {k: v for k, v in sections.items() if any(x is not None for x in v.values())}


def _vocabulary(o: dict) -> dict:
    """Old flag names (hidden) folded into the new ones; SLOs in seconds inside."""
    from infercast.commands._common import renamed

    o["rate"] = renamed(o["rate"], o.pop("rate_old"), "--request-rate", "--rate")
    o["concurrency"] = renamed(
        o["concurrency"], o.pop("concurrency_old"), "--max-concurrency", "--concurrency"
    )
    o["num_requests"] = renamed(
        o["num_requests"], o.pop("num_requests_old"), "--num-prompts", "--num-requests"
    )
    for name in ("ttft", "tpot"):
        ms = o.pop(f"slo_{name}_ms")
        o[f"slo_{name}_s"] = renamed(
            None if ms is None else ms / 1e3,
            o[f"slo_{name}_s"],
            f"--slo-{name}-ms",
            f"--slo-{name}-s",
        )
    return o


def _harness(o: dict, base: dict):
    """``--harness NAME``: a function config -> the workload fields that harness's closed loop sets
    (:func:`infercast.sim.clients.closed_loop_workload`: request count unless --num-prompts is
    given, length draws unless --input-dist/--output-dist are); None without the flag."""
    if not o.get("harness"):
        return None
    from infercast.errors import ConfigError
    from infercast.sim.clients import closed_loop_workload, load_harness

    h = load_harness(o["harness"])
    wl = base.get("workload") or {}
    if o["concurrency"] is None and wl.get("concurrency") is None:
        raise ConfigError(
            f"--harness {o['harness']}: a benchmark client runs a closed loop; give "
            "--max-concurrency"
        )
    keep_n = o["num_requests"] is not None or wl.get("num_requests") is not None
    keep = [
        k
        for k in ("input", "output")
        if o[f"{k}_dist"] is not None or (wl.get(k) or {}).get("dist")
    ]

    def fields(cfg) -> dict:
        w = cfg.workload
        out = closed_loop_workload(
            h,
            w.concurrency,
            max(1, round(w.input.mean or 1024)),
            max(1, round(w.output.mean or 256)),
            model=cfg.model,  # a chat client adds the model's template to each prompt
        )
        out.pop("arrival")
        out.pop("concurrency")
        if keep_n:
            out.pop("num_requests")
        for k in keep:
            out.pop(k)
        return out

    return fields


def _trace_size(base: dict, o: dict) -> int | None:
    """Rows of the run's trace when the request count is left to default (a trace is replayed
    once)."""
    wl = base.get("workload") or {}
    trace = o["trace"] or wl.get("trace")
    if trace is None or o["num_requests"] is not None or wl.get("num_requests") is not None:
        return None
    from infercast.sim.workload import load_trace

    return len(load_trace(trace))


def _sweep(o: dict) -> tuple[str | None, list]:
    """("rate" | "concurrency" | None, values): a comma list on one of the two flags sweeps it."""
    from infercast.commands._common import parse_float_list, parse_int_list
    from infercast.errors import ConfigError

    rates = parse_float_list(o["rate"], "--request-rate") if o["rate"] is not None else [None]
    conc = (
        parse_int_list(o["concurrency"], "--max-concurrency")
        if o["concurrency"] is not None
        else [None]
    )
    if len(rates) > 1 and len(conc) > 1:
        raise ConfigError("sweep one of --request-rate or --max-concurrency, not both")
    if len(conc) > 1:
        return "concurrency", conc
    return ("rate" if len(rates) > 1 else None), rates if len(rates) > 1 else [(rates[0], conc[0])]


def run_simulate(o: dict) -> None:
    import sys

    from infercast.commands._common import print_json
    from infercast.sim.config import build_config, merge, read_config_file
    from infercast.sim.presets import build_step_model, with_engine, with_profile_compute
    from infercast.sim.run import simulate
    from infercast.validation import check_writable, check_writable_dir

    check_writable(o["records"], "--records", make_parents=True)
    check_writable_dir(o["plot"], "--plot")

    base = read_config_file(o["config"]) if o["config"] is not None else {}
    harness = _harness(o, base)
    if o["num_requests"] is None:  # 0 is a bad value for the config's checks, not "default"
        o["num_requests"] = _trace_size(base, o)
    flags = _overrides(o)
    base, preset = with_engine(  # the preset under the file and flags
        with_profile_compute(merge(base, flags), o["profile"]), o["engine"]
    )
    key, values = _sweep(o)
    rate = float(o["rate"]) if o["rate"] is not None and key != "rate" else None
    conc = int(o["concurrency"]) if o["concurrency"] is not None and key != "concurrency" else None
    configs = []
    for v in values:
        if key is None:
            rate, conc = v
        wl = {
            "rate": v if key == "rate" else rate,
            "concurrency": v if key == "concurrency" else conc,
        }
        cfg = build_config(merge(base, merge(flags, {"workload": wl})))
        if harness is not None:  # the harness's request count and length draws at this concurrency
            wl |= harness(cfg)
            cfg = build_config(merge(base, merge(flags, {"workload": wl})))
        configs.append(cfg)
    step_model = build_step_model(configs[0], o["profile"], preset)
    from infercast.sim.economics import economics, price_for
    from infercast.sim.levers import lever_facts, lever_lines

    price, price_source = price_for(configs[0].hardware, o["price"])
    show_progress = o["progress"] and sys.stderr.isatty()
    if o["records"]:  # one file for the whole command: truncate once, each run appends
        from pathlib import Path

        Path(o["records"]).parent.mkdir(parents=True, exist_ok=True)
        Path(o["records"]).write_text("")
    runs = []
    for cfg in configs:
        acc = _accumulator(cfg)
        tag = _tag(cfg, key)
        with (
            _RecordWriter(o["records"], tag) as sink,
            _progress(show_progress, cfg.workload.num_requests, _label(cfg)) as progress,
        ):
            result = simulate(cfg, step_model, accumulator=acc, sink=sink, progress=progress)
        result.extra.update(economics(result, cfg, step_model, price), price_source=price_source)
        result.extra.update(lever_facts(step_model))
        runs.append((_label(cfg), result, acc, cfg))
    if o["timeline"]:
        _write_timeline(o["timeline"], runs, key)
    if o["plot"]:
        from infercast.report.sim_plots import plot_runs

        xs = [_tag(c, key)[1] if key else None for *_, c in runs]
        plot_runs([(lbl, r, a) for lbl, r, a, _ in runs], xs, o["plot"], key or "rate")
    dicts = [_run_dict(r, c) for _, r, _, c in runs]
    for d in dicts:  # what timed the run: the efficiency profile (group) and the engine preset
        d.update(
            profile=getattr(getattr(step_model, "profile", None), "name", None),
            engine=preset.name if preset else None,
        )
    levers = None
    if o["what_if"]:
        from infercast.whatif import simulate_what_if

        levers = simulate_what_if(configs[0], profile=getattr(step_model, "profile", None))
        dicts[0]["what_if"] = levers
    if o["as_json"]:
        print_json({"sweep": key, "runs": dicts} if key else dicts[0])
        return
    from infercast.report.console import make_console
    from infercast.report.sim_tables import print_runs, what_if_table

    print_runs(runs, dicts, configs[0], make_console())
    for line in lever_lines(dicts[0]):
        print(line)
    if levers:
        make_console().print(what_if_table(levers))


def _label(cfg) -> str:
    w = cfg.workload
    if w.rate and w.resolved_conversations:
        return f"{w.rate:g} sessions/s"
    if w.rate:
        return f"rate {w.rate:g}/s"
    if w.concurrency:
        return f"concurrency {w.concurrency}"
    return w.resolved_arrival


def _tag(cfg, key: str | None) -> tuple[str, float] | None:
    """The (JSON key, value) that tells sweep runs apart, or None."""
    if key == "rate":
        return "rate_per_s", cfg.workload.rate
    if key == "concurrency":
        return "concurrency", cfg.workload.concurrency
    return None


def _write_timeline(path: str, runs, key: str | None) -> None:
    """Batch size, KV usage, queue and preemptions over time (decimated) as CSV."""
    import csv
    from pathlib import Path

    from infercast.sim.series import FIELDS

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow((*FIELDS, _tag(runs[0][3], key)[0]) if key else FIELDS)
        for _, result, _, cfg in runs:
            cols = result.series.arrays()
            for row in zip(*(cols[f].tolist() for f in FIELDS), strict=True):
                w.writerow((*row, _tag(cfg, key)[1]) if key else row)


def _accumulator(cfg):
    from infercast.metrics.summary import MetricsAccumulator

    return MetricsAccumulator(slo_ttft_s=cfg.slo_ttft_s, slo_tpot_s=cfg.slo_tpot_s)


def _run_dict(result, cfg) -> dict:
    out = result.to_dict()
    out.update(
        model=cfg.model,
        hardware=cfg.hardware,
        scheduler=cfg.scheduler.policy,
        arrival=cfg.workload.resolved_arrival,
        rate_per_s=cfg.workload.rate,
        concurrency=cfg.workload.concurrency,
        trace=cfg.workload.trace,
        replicas=cfg.replicas,
        router=cfg.router,
        seed=cfg.seed,
        mode=cfg.mode,
    )
    # The whole resolved run (TP, dtypes, scheduler limits, workload, defaults filled in): a result
    # file says exactly what was simulated.
    out["config"] = cfg.model_dump(mode="json")
    return out


class _RecordWriter:
    """Streams RequestRecords as JSON lines (appending, so a sweep shares one file)."""

    def __init__(self, path: str | None, tag: tuple[str, float] | None):
        self.path, self.tag, self.fh = path, tag, None

    def __enter__(self):
        if not self.path:
            return None
        from pathlib import Path

        self.fh = Path(self.path).open("a")
        return self.write

    def write(self, rec) -> None:
        import json

        d = {
            "request_id": rec.request_id,
            "arrival_s": rec.arrival_s,
            "prompt_tokens": rec.prompt_tokens,
            "output_tokens": rec.output_tokens,
            "ttft_s": rec.ttft_s,
            "tpot_s": rec.tpot_s,
            "e2e_s": rec.e2e_s,
            "first_scheduled_s": rec.first_scheduled_s,
            "finish_s": rec.finish_s,
            "finish_reason": rec.finish_reason,
            "error": rec.error,
            "num_preemptions": rec.num_preemptions,
            "cached_prompt_tokens": rec.cached_prompt_tokens,
            "chunk_times_s": [float(t) for t in rec.chunk_times_s],
        }
        if self.tag is not None:
            d[self.tag[0]] = self.tag[1]
        self.fh.write(json.dumps(d) + "\n")

    def __exit__(self, *exc) -> None:
        if self.fh is not None:
            self.fh.close()


class _progress:
    """A rich progress bar on stderr (or nothing), as a ``progress(num_done)`` callback."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.enabled, self.total, self.label = enabled, total, label

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.progress import Progress

        from infercast.report.console import make_console

        self.bar = Progress(console=make_console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task(f"simulating ({self.label})", total=self.total)
        return lambda done: self.bar.update(task, completed=done)

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.bar.stop()


def register(app: typer.Typer) -> None:
    @app.command("simulate", help=HELP)
    def simulate_cmd(
        config: str | None = typer.Option(
            None, "--config", help="TOML/YAML run config (flags override it)"
        ),
        model: str | None = typer.Option(
            None, "--model", "-m", help="preset name or config.json path (default: llama-3.1-8b)"
        ),
        hardware: str | None = typer.Option(
            None, "--hardware", "-H", help="preset key or spec file (default: h100-sxm)"
        ),
        weights: str | None = typer.Option(
            None, help="weight dtype, or checkpoint: as the model's config.json ships it (default)"
        ),
        experts: str | None = typer.Option(
            None,
            "--experts",
            help="routed experts' own precision, e.g. mxfp4/bf16; none = the weights' dtype "
            "(default: the checkpoint's)",
        ),
        kv_cache: opts.KvCache = None,
        tp: int | None = typer.Option(None, help="tensor-parallel GPUs per replica (default: 1)"),
        ep: int | None = typer.Option(
            None, help="expert-parallel GPUs (MoE, at most --tp; default: 1)"
        ),
        attn_dp: bool | None = typer.Option(
            None, "--attn-dp/--no-attn-dp", help="attention data parallel across the TP GPUs"
        ),
        scheduler: str | None = typer.Option(
            None, "--scheduler", help="static | continuous | chunked (default: chunked)"
        ),
        max_num_seqs: int | None = typer.Option(None, help="max requests per step (default: 256)"),
        max_num_batched_tokens: int | None = typer.Option(
            None, help="token budget per step (default: 8192)"
        ),
        block_size: int | None = typer.Option(None, help="KV block size in tokens (default: 16)"),
        num_blocks: int | None = typer.Option(
            None, help="KV blocks per replica (default: from the memory plan)"
        ),
        prefix_caching: bool | None = typer.Option(
            None,
            "--prefix-caching/--no-prefix-caching",
            help="share cached prompt blocks (default: off)",
        ),
        max_model_len: int | None = typer.Option(
            None, help="reject prompt+output longer than this"
        ),
        replicas: int | None = typer.Option(None, help="replicas behind the router (default: 1)"),
        router: str | None = typer.Option(
            None, help="round-robin | least-tokens | prefix-affinity"
        ),
        workload: str | None = typer.Option(
            None, help="arrivals: poisson | gamma | closed | offline | trace"
        ),
        rate: str | None = typer.Option(
            None, "--request-rate", help="requests/s; a list (1,2,4) runs a sweep"
        ),
        rate_old: str | None = typer.Option(None, "--rate", hidden=True),
        cv: float | None = typer.Option(
            None, help="gamma arrivals: CV of inter-arrival gaps (default: 1)"
        ),
        concurrency: str | None = typer.Option(
            None,
            "--max-concurrency",
            help="closed loop: requests kept in flight; a list (8,32) sweeps",
        ),
        concurrency_old: opts.OldConcurrency = None,
        num_requests: int | None = typer.Option(
            None, "--num-prompts", help="requests to simulate (default: a trace's rows, else 1000)"
        ),
        num_requests_old: opts.OldNumRequests = None,
        trace: str | None = typer.Option(None, help="azure-conv | azure-code | CSV/JSONL file"),
        input_tokens: float | None = typer.Option(
            None, help="prompt length mean (default: 1024; trace lengths with --trace)"
        ),
        input_dist: str | None = typer.Option(
            None, help="fixed | uniform | normal | lognormal | trace"
        ),
        input_std: float | None = typer.Option(None, help="prompt length standard deviation"),
        output_tokens: float | None = typer.Option(
            None, help="output length mean (default: 256; trace lengths with --trace)"
        ),
        output_dist: str | None = typer.Option(
            None, help="fixed | uniform | normal | lognormal | trace"
        ),
        output_std: float | None = typer.Option(None, help="output length standard deviation"),
        prefix_groups: int | None = typer.Option(None, help="number of shared-prefix groups"),
        prefix_tokens: int | None = typer.Option(None, help="tokens of each group's shared prefix"),
        conversations: str | None = typer.Option(
            None,
            "--conversations",
            help="multi-turn sessions: builtin (Mooncake's chat trace) | synthetic | CSV; "
            "--num-prompts then counts sessions, --request-rate is sessions/s, "
            "--input/--output-tokens each message/answer",
        ),
        turns: int | None = typer.Option(
            None,
            "--turns",
            help="conversations: turns per session (default: the source's; alone: synthetic)",
        ),
        think_time_s: float | None = typer.Option(
            None,
            "--think-time-s",
            help="conversations: seconds from an answer's last token to the next message "
            "(default: the source's)",
        ),
        seed: int | None = typer.Option(None, help="random seed (default: 0)"),
        mode: str | None = typer.Option(
            None, help="fast | exact (one event per step) (default: fast)"
        ),
        slo_ttft_ms: float | None = typer.Option(
            None, "--slo-ttft-ms", help="goodput TTFT limit (ms)"
        ),
        slo_tpot_ms: float | None = typer.Option(
            None, "--slo-tpot-ms", help="goodput TPOT limit (ms)"
        ),
        slo_ttft_s: opts.OldSloTtftS = None,
        slo_tpot_s: opts.OldSloTpotS = None,
        speculative: str | None = typer.Option(
            None, "--speculative", help="speculative decoding: eagle | mtp | draft (runs exact)"
        ),
        num_speculative_tokens: int | None = typer.Option(
            None, help="drafted tokens per step k (default: 3)"
        ),
        acceptance: float | None = typer.Option(
            None, help="mean per-token draft acceptance rate (default: 0.8)"
        ),
        acceptance_std: float | None = typer.Option(
            None, help="spread of acceptance across requests (Beta; default: 0)"
        ),
        draft_model: str | None = typer.Option(None, help="--speculative draft: the draft model"),
        disaggregated: bool = typer.Option(
            False, "--disaggregated", help="separate prefill and decode pools"
        ),
        prefill_replicas: int | None = typer.Option(
            None, help="disaggregated: prefill replicas (default: 1)"
        ),
        decode_replicas: int | None = typer.Option(
            None, help="disaggregated: decode replicas (default: 1)"
        ),
        prefill_tp: opts.PrefillTp = None,
        decode_tp: opts.DecodeTp = None,
        prefill_hardware: str | None = typer.Option(
            None, help="disaggregated: prefill part (default: --hardware)"
        ),
        decode_hardware: str | None = typer.Option(
            None, help="disaggregated: decode part (default: --hardware)"
        ),
        transfer_bandwidth: opts.TransferBandwidth = None,
        transfer_latency_s: opts.TransferLatency = None,
        layer_overlap: bool | None = typer.Option(
            None, "--layer-overlap/--no-layer-overlap", help="send KV layer by layer during prefill"
        ),
        kv_offload_gib: float | None = typer.Option(
            None,
            "--kv-offload-gib",
            help="host-DRAM KV tier per replica, GiB (needs --prefix-caching)",
        ),
        host_link_gbps: float | None = typer.Option(
            None,
            "--host-link-gbps",
            help="host-to-GPU GB/s per GPU for KV reloads and adapter loads (default: the part's "
            "measured link)",
        ),
        kv_offload_overlap: bool | None = typer.Option(
            None,
            "--kv-offload-overlap/--no-kv-offload-overlap",
            help="reload KV layer by layer under compute (default: the step waits)",
        ),
        expert_skew: float | None = typer.Option(
            None,
            "--expert-skew",
            help="MoE routing skew: Zipf exponent over experts by load (0 = uniform)",
        ),
        expert_loads: str | None = typer.Option(
            None,
            "--expert-loads",
            help="MoE routing: CSV of expert,load (a measured per-expert histogram)",
        ),
        redundant_experts: int | None = typer.Option(
            None,
            "--redundant-experts",
            help="EPLB: redundant expert slots over the EP group (default: 0)",
        ),
        lora_rank: int | None = typer.Option(
            None, "--lora-rank", help="serve LoRA adapters of this rank"
        ),
        lora_targets: str | None = typer.Option(
            None,
            "--lora-targets",
            help="LoRA targets: q,k,v,o,gate,up,down | attn | mlp | all (default: attn)",
        ),
        lora_adapters: int | None = typer.Option(
            None,
            "--lora-adapters",
            help="distinct, equally popular adapters in the workload (default: 1)",
        ),
        lora_slots: int | None = typer.Option(
            None,
            "--lora-slots",
            help="adapters resident on the GPU (vLLM --max-loras; default: all)",
        ),
        profile: opts.Profile = None,
        engine: opts.Engine = None,
        harness: str | None = typer.Option(
            None,
            "--harness",
            help="closed loop as a benchmark client runs it: inferencex, vllm-bench-serve, "
            "sglang-bench-serving or a .toml (its request count and length draws)",
        ),
        price: float | None = typer.Option(
            None,
            "--price",
            help="$/GPU-hour for the dollar figures (default: the shipped price table's median)",
        ),
        what_if: bool = typer.Option(
            False, "--what-if", help="re-run with int4 / fp8 weights, fp8 KV, 2x TP and compare"
        ),
        as_json: opts.Json = False,
        records: str | None = typer.Option(
            None, "--records", help="write one JSON line per request"
        ),
        plot: str | None = typer.Option(
            None, "--plot", help="directory for latency CDF / vs-rate / timeline PNGs"
        ),
        timeline: str | None = typer.Option(
            None, "--timeline", help="CSV of batch size, KV usage, queue, preemptions over time"
        ),
        progress: bool = typer.Option(
            True, "--progress/--no-progress", help="progress bar on stderr (TTY only)"
        ),
    ) -> None:
        run_simulate(_vocabulary(dict(locals())))
