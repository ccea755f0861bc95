"""``infercast fleet``: a day of traffic on a fleet of replicas behind a router, autoscaled."""

from __future__ import annotations

import typer

from infercast.commands import _options as opts

HELP = (
    "Simulate a day of traffic on a fleet of replicas behind a router under an autoscaling "
    "policy (or all of them): SLO attainment, goodput, replicas, utilization, queue, $/day, "
    "kWh/day, $/M tokens and the bottleneck, per minute and per day."
)

POLICY_NAMES = ("fixed", "reactive", "scheduled", "predictive")
# fleet/'s parameters named otherwise than this command's options (cli.command_flags)
PARAM_FLAGS = {
    "storage_bytes_per_s": "--storage-bandwidth",
    "up": "--scale-up",
    "down": "--scale-down",
    "base_count": "--base-replicas",
}


def _slos_in_seconds(o: dict) -> dict:
    """SLOs come in ms as in every command (``--slo-ttft-ms``); the seconds names are hidden
    aliases."""
    from infercast.commands._common import renamed

    for name, default_s in (("ttft", 2.0), ("tpot", 0.1)):
        ms = o.pop(f"slo_{name}_ms")
        s = renamed(
            None if ms is None else ms / 1e3,
            o[f"slo_{name}_s"],
            f"--slo-{name}-ms",
            f"--slo-{name}-s",
        )
        o[f"slo_{name}_s"] = default_s if s is None else s
    return o


def run_fleet(o: dict) -> None:
    from infercast.commands._common import print_json
    from infercast.errors import ConfigError
    from infercast.fleet.day import build_replica, make_policy, run_day
    from infercast.fleet.load import day_load
    from infercast.fleet.policies import parse_schedule
    from infercast.fleet.run import FleetSpec
    from infercast.sim.config import build_config
    from infercast.validation import check_int, check_number, check_plot_path, check_writable

    check_writable(o["per_minute"], "--per-minute")
    check_plot_path(o["plot"], "--plot")
    for flag, key in (
        ("--max-num-seqs", "max_num_seqs"),
        ("--max-replicas", "max_replicas"),
        ("--workers", "workers"),
        ("--tp", "tp"),
        ("--replicas", "replicas"),
        ("--prefill-replicas", "prefill_replicas"),
        ("--decode-replicas", "decode_replicas"),
        ("--prefill-tp", "prefill_tp"),
        ("--decode-tp", "decode_tp"),
    ):
        if o[key] is not None:
            check_int(o[key], flag, 1, fix="give at least 1")
    check_number(
        o["headroom"], "--headroom", 0, lo_open=True, fix="give a factor above 0, e.g. 1.25"
    )
    if (o["per_minute"] or o["plot"]) and o["groups"] > 1:
        raise ConfigError("--per-minute and --plot need one router group (--groups 1)")
    names = (
        POLICY_NAMES if o["policy"] == "all" else tuple(p.strip() for p in o["policy"].split(","))
    )
    for n in names:
        if n not in POLICY_NAMES:
            raise ConfigError(f"--policy {n!r}: choose {', '.join(POLICY_NAMES)} or all")
    cfg = build_config(
        {
            k: v
            for k, v in {
                "model": o["model"],
                "hardware": o["hardware"],
                "weights": o["weights"],
                "kv_cache": o["kv_cache"],
                "tp": o["tp"],
                "slo_ttft_s": o["slo_ttft_s"],
                "slo_tpot_s": o["slo_tpot_s"],
                "seed": o["seed"],
                "scheduler": {"max_num_seqs": o["max_num_seqs"]}
                if o["max_num_seqs"] is not None
                else None,
                "disaggregation": _disaggregation(o),
            }.items()
            if v is not None
        }
    )
    from infercast.fleet.load import parse_window

    window = parse_window(o["trace_window"]) if o["trace_window"] else None
    load = day_load(
        o["peak_rate"],
        window[1] if window else o["hours"],
        o["trace"],
        o["lengths"],
        o["input_tokens"],
        o["output_tokens"],
        o["trough_fraction"],
        o["peak_hour"],
        window,
    )
    schedule = parse_schedule(o["schedule"]) if o["schedule"] else None
    from infercast.cost.profiles import resolve_profile
    from infercast.specs.catalog import load_hardware

    profile = resolve_profile(
        o["profile"], load_hardware(cfg.hardware).key
    )  # default: the shipped one
    from infercast.cost.dollars import check_price

    pool_prices = (o["prefill_price"], o["decode_price"])
    for flag, v in zip(("--prefill-price", "--decode-price"), pool_prices, strict=True):
        check_price(v, flag)
    rep = build_replica(
        cfg,
        load,
        o["price"],
        o["storage_bandwidth"],
        o["warmup_s"],
        profile=profile,
        pool_prices=pool_prices,
    )
    base = _base_replica(cfg, load, o, profile)
    base_rps = base.capacity_rps * o["base_replicas"] if base is not None else 0.0
    policies = [
        make_policy(
            n,
            rep,
            load,
            o["tick_s"],
            o["replicas"],
            o["min_replicas"],
            o["max_replicas"],
            o["metric"],
            o["scale_up"],
            o["scale_down"],
            schedule,
            o["headroom"],
            o["stabilization_s"],
            base_rps,
        )
        for n in names
    ]
    runs = {}
    if o["groups"] < 1:
        raise ConfigError(f"--groups must be >= 1, got {o['groups']}")
    for pol in policies:
        first = pol.replicas if pol.name == "fixed" else max(o["min_replicas"], 1)
        spec = FleetSpec(rep.start_s, first, o["tick_s"], o["max_queue_s"], o["seed"])
        if o["groups"] > 1:
            runs[pol.name] = _sharded(rep, load, pol, spec, o, schedule, profile)
        else:
            runs[pol.name] = run_day(rep, load, pol, spec, base, o["base_replicas"] or 0)
    header = {
        "model": cfg.model,
        "hardware": cfg.hardware,
        "weights": cfg.weights,
        "tp": cfg.tp,
        "load": load.source,
        "hours": load.duration_s / 3600,
        "expected_requests": load.expected_requests,
        "replica_start_s": rep.start_s,
        "replica_capacity_rps": rep.capacity_rps,
        "gpus_per_replica": rep.gpus,
        "price_per_gpu_hour": rep.price_per_gpu_hour,
        "price_source": rep.price_source,
        "slo": {"ttft_s": cfg.slo_ttft_s, "tpot_s": cfg.slo_tpot_s},
    }
    if rep.unit is not None:  # every "replica" of the report is a disaggregated unit
        header["unit"] = rep.unit.describe()
    if base is not None:
        header["base_pool"] = {
            "hardware": base.cfg.hardware,
            "tp": base.cfg.tp,
            "replicas": o["base_replicas"],
            "replica_capacity_rps": base.capacity_rps,
            "gpus_per_replica": base.gpus,
            "price_per_gpu_hour": base.price_per_gpu_hour,
            "price_source": base.price_source,
        }
    if o["per_minute"]:
        _write_ticks(o["per_minute"], runs)
    if o["plot"]:
        from infercast.report.fleet_plots import plot_policies

        plot_policies(runs, o["plot"], f"{cfg.model} on {cfg.hardware} (TP{cfg.tp}): {load.source}")
    if o["as_json"]:
        print_json(
            {
                **header,
                "policies": {k: {"day": v["day"], "ticks": v["ticks"]} for k, v in runs.items()},
            }
        )
        return
    from infercast.report.fleet_tables import print_fleet

    print_fleet(header, runs, o["storage_bandwidth"], o["warmup_s"], o["plot"])


def _disaggregation(o: dict) -> dict | None:
    """The ``[disaggregation]`` section of every policy member (a unit of prefill and decode
    replicas, ``fleet/members.py``), or None for aggregated replicas."""
    from infercast.errors import ConfigError

    pools = {
        name: {
            k: o[f"{name}_{k}"]
            for k in ("replicas", "tp", "hardware")
            if o[f"{name}_{k}"] is not None
        }
        for name in ("prefill", "decode")
    }
    link = {
        "transfer_bandwidth_bytes_per_s": o["transfer_bandwidth"],
        "transfer_latency_s": o["transfer_latency_s"],
        "prices": o["prefill_price"] if o["prefill_price"] is not None else o["decode_price"],
    }
    if not o["disaggregated"]:
        if any(pools.values()) or any(v is not None for v in link.values()):
            raise ConfigError(
                "--prefill-*/--decode-*/--transfer-* describe disaggregated units: "
                "add --disaggregated (or drop them)"
            )
        return None
    if o["base_hardware"] is not None:
        raise ConfigError(
            "a base pool (--base-hardware) is not modelled beside disaggregated units"
        )
    link.pop("prices")
    return {**{k: v for k, v in link.items() if v is not None}, **pools}


def _base_replica(cfg, load, o: dict, profile):
    """A mixed fleet's always-on base pool: the same model and precision on ``--base-hardware``
    (its own TP, price and profile), or None."""
    from infercast.errors import ConfigError
    from infercast.fleet.day import build_replica
    from infercast.validation import check_int

    if o["base_hardware"] is None:
        if any(o[k] is not None for k in ("base_replicas", "base_tp", "base_price")):
            raise ConfigError(
                "--base-replicas, --base-tp and --base-price describe a base pool: "
                "give --base-hardware too"
            )
        return None
    if o["base_replicas"] is None:
        raise ConfigError("--base-hardware needs --base-replicas N (the base pool's size)")
    check_int(o["base_replicas"], "--base-replicas", 1, fix="give the base pool at least 1 replica")
    if o["groups"] > 1:
        raise ConfigError("a base pool (--base-hardware) runs in one router group: use --groups 1")
    from infercast.cost.profiles import resolve_profile
    from infercast.sim.config import build_config
    from infercast.specs.catalog import load_hardware

    data = cfg.model_dump(exclude={"workload", "hardware", "tp"})
    bcfg = build_config({**data, "hardware": o["base_hardware"], "tp": o["base_tp"] or cfg.tp})
    bprofile = resolve_profile(o["profile"], load_hardware(bcfg.hardware).key)
    return build_replica(
        bcfg, load, o["base_price"], o["storage_bandwidth"], o["warmup_s"], profile=bprofile
    )


def _sharded(rep, load, pol, spec, o: dict, schedule, profile) -> dict:
    """The policy's day over ``--groups`` router groups (fleet/shard.py): the merged day, no
    ticks."""
    from infercast.fleet.shard import run_sharded

    kw = {
        "replicas": getattr(pol, "replicas", None) if pol.name == "fixed" else None,
        "min_replicas": o["min_replicas"],
        "max_replicas": getattr(pol, "max_replicas", None),
        "metric": o["metric"],
        "up": o["scale_up"],
        "down": o["scale_down"],
        "schedule": schedule,
        "headroom": o["headroom"],
        "stabilization_s": o["stabilization_s"],
    }
    out = run_sharded(
        rep,
        load,
        pol.name,
        kw,
        spec,
        o["groups"],
        o["executor"],
        o["workers"],
        o["storage_bandwidth"],
        o["warmup_s"],
        profile,
    )
    out["day"]["policy_detail"] = f"{pol.describe()}, split over {o['groups']} router groups"
    return {"day": out["day"], "ticks": [], "groups": out["groups"]}


def _write_ticks(path: str, runs: dict) -> None:
    import csv
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with Path(path).open("w", newline="") as fh:
        w = None
        for name, out in runs.items():
            for r in out["ticks"]:
                if w is None:
                    w = csv.DictWriter(fh, fieldnames=["policy", *r])
                    w.writeheader()
                w.writerow({"policy": name, **r})


def register(app: typer.Typer) -> None:
    @app.command("fleet", help=HELP)
    def fleet_cmd(
        model: str = typer.Option(
            "llama-3.1-8b", "--model", "-m", help="preset name or config.json path"
        ),
        hardware: str = typer.Option("h100-sxm", "--hardware", "-H", help="part of every replica"),
        weights: str | None = typer.Option(
            None, help="weight dtype (default: as the checkpoint ships)"
        ),
        kv_cache: opts.KvCache = None,
        tp: int | None = typer.Option(None, help="GPUs per replica (tensor parallel; default 1)"),
        max_num_seqs: int | None = typer.Option(
            None, help="max requests per step per replica (default 256)"
        ),
        policy: str = typer.Option(
            "all", "--policy", help="fixed | reactive | scheduled | predictive | all (compare)"
        ),
        peak_rate: float | None = typer.Option(
            None,
            "--peak-rate",
            help="requests/s at the busiest minute (diurnal curve, or rescales --trace)",
        ),
        hours: float = typer.Option(
            24.0, "--hours", help="length of the day simulated (a trace is stretched to it)"
        ),
        trace: str | None = typer.Option(
            None,
            "--trace",
            help="arrival trace: azure-conv | azure-code | CSV/JSONL (its per-minute rate), or a "
            "rate trace servegen-m-large | servegen-m-mid | servegen-m-small (14 days)",
        ),
        trace_window: str | None = typer.Option(
            None,
            "--trace-window",
            help="START_H:HOURS of a long --trace at its own time, not stretched (48:24: day 3)",
        ),
        lengths: str | None = typer.Option(
            None,
            "--lengths",
            help="trace whose (prompt, output) pairs requests draw (default: --trace, else "
            "azure-conv)",
        ),
        input_tokens: int | None = typer.Option(
            None, help="fixed prompt length (with --output-tokens: instead of trace lengths)"
        ),
        output_tokens: int | None = typer.Option(None, help="fixed output length"),
        trough_fraction: float = typer.Option(
            0.2, "--trough-fraction", help="diurnal: night rate as a fraction of the peak"
        ),
        peak_hour: float = typer.Option(14.0, "--peak-hour", help="diurnal: hour of the peak"),
        replicas: int | None = typer.Option(
            None, "--replicas", help="fixed policy: replicas (default: sized for the peak)"
        ),
        min_replicas: int = typer.Option(1, "--min-replicas", help="autoscaling lower bound"),
        max_replicas: int | None = typer.Option(
            None, "--max-replicas", help="autoscaling upper bound (default: 2x the peak's need)"
        ),
        metric: str = typer.Option(
            "queue",
            "--metric",
            help="reactive: queue (waiting per replica) | kv (KV use) | util (busy fraction)",
        ),
        scale_up: float | None = typer.Option(
            None, "--scale-up", help="reactive: add a replica above this (default per metric)"
        ),
        scale_down: float | None = typer.Option(
            None, "--scale-down", help="reactive: remove one below this"
        ),
        stabilization_s: float = typer.Option(
            300.0,
            "--stabilization-s",
            help="reactive: the metric must stay below --scale-down this long before a replica is "
            "removed",
        ),
        schedule: str | None = typer.Option(
            None,
            "--schedule",
            help="scheduled: hour:replicas pairs, e.g. 0:2,8:6,20:3 (default: sized from the "
            "curve)",
        ),
        headroom: float = typer.Option(
            1.25, "--headroom", help="scheduled/predictive/fixed sizing: capacity over the rate"
        ),
        storage_bandwidth: float = typer.Option(
            2e9, "--storage-bandwidth", help="bytes/s a replica reads its weights at when it starts"
        ),
        warmup_s: float = typer.Option(
            60.0, "--warmup-s", help="engine warm-up after the weights are loaded (s)"
        ),
        tick_s: float = typer.Option(
            60.0, "--tick-s", help="seconds between autoscaler decisions (and report rows)"
        ),
        max_queue_s: float = typer.Option(
            300.0, "--max-queue-s", help="a request waiting this long at the router is rejected"
        ),
        slo_ttft_ms: float | None = typer.Option(
            None, "--slo-ttft-ms", help="SLO: time to first token (ms; default 2000)"
        ),
        slo_tpot_ms: float | None = typer.Option(
            None, "--slo-tpot-ms", help="SLO: time per output token (ms; default 100)"
        ),
        slo_ttft_s: opts.OldSloTtftS = None,
        slo_tpot_s: opts.OldSloTpotS = None,
        price: float | None = typer.Option(
            None, "--price", help="$/GPU-hour (default: the shipped price table's median)"
        ),
        seed: int = typer.Option(0, "--seed", help="random seed of the arrivals and lengths"),
        per_minute: str | None = typer.Option(
            None, "--per-minute", help="write every tick's row to this CSV"
        ),
        plot: str | None = typer.Option(
            None, "--plot", help="PNG: cost vs SLO attainment and replicas over the day"
        ),
        as_json: opts.Json = False,
        profile: opts.Profile = None,
        base_hardware: str | None = typer.Option(
            None,
            "--base-hardware",
            help="mixed fleet: a base pool of this part, always on, beside the policy's replicas",
        ),
        base_replicas: int | None = typer.Option(
            None, "--base-replicas", help="mixed fleet: replicas in the base pool"
        ),
        base_tp: int | None = typer.Option(
            None, "--base-tp", help="mixed fleet: GPUs per base replica (default --tp)"
        ),
        base_price: float | None = typer.Option(
            None,
            "--base-price",
            help="mixed fleet: $/GPU-hour of the base pool (default: its part's median)",
        ),
        disaggregated: bool = typer.Option(
            False,
            "--disaggregated",
            help="every replica the policy scales is a unit of prefill and decode replicas",
        ),
        prefill_replicas: int | None = typer.Option(
            None, help="disaggregated: prefill replicas per unit (default: 1)"
        ),
        decode_replicas: int | None = typer.Option(
            None, help="disaggregated: decode replicas per unit (default: 1)"
        ),
        prefill_tp: opts.PrefillTp = None,
        decode_tp: opts.DecodeTp = None,
        prefill_hardware: str | None = typer.Option(
            None, help="disaggregated: the prefill pool's part (default: --hardware)"
        ),
        decode_hardware: str | None = typer.Option(
            None, help="disaggregated: the decode pool's part (default: --hardware)"
        ),
        prefill_price: float | None = typer.Option(
            None, help="disaggregated: prefill $/GPU-hour (default: --price, else its part's)"
        ),
        decode_price: float | None = typer.Option(
            None, help="disaggregated: decode $/GPU-hour (default: --price, else its part's)"
        ),
        transfer_bandwidth: opts.TransferBandwidth = None,
        transfer_latency_s: opts.TransferLatency = None,
        groups: int = typer.Option(
            1, "--groups", help="independent router groups the day is sharded over (fleet/shard.py)"
        ),
        executor: str = typer.Option(
            "local", "--executor", help="where groups run: local (process pool) | serial | ray"
        ),
        workers: opts.Workers = None,
    ) -> None:
        run_fleet(_slos_in_seconds(dict(locals())))
