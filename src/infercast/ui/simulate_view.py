"""The Simulate view: a form -> the config ``infercast simulate`` builds -> ``sim.run.simulate``.

The form maps onto the same nested config layout the CLI flags fill
(``sim.config.build_config``), and the run is the library's ``simulate`` with a
metrics accumulator; the page gets the run's JSON (as ``--json`` prints it), the
per-request samples behind the CDFs (sorted, thinned to at most ``CDF_POINTS``
quantiles) and the timeline (``sim.series``), thinned the same way.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from pydantic import Field

from infercast.errors import InfercastError
from infercast.ui.inputs import FieldError, Form, check_dtype, profile_for

CDF_POINTS = 400
TIMELINE_POINTS = 1500
MAX_REQUESTS = 20_000


class SimulateForm(Form):
    """The Simulate view's inputs (a subset of ``infercast simulate``'s flags)."""

    model: str = "llama-3.1-8b"
    hardware: str = "h100-sxm"
    weights: str = "checkpoint"
    kv_cache: str = ""
    tp: int = Field(1, ge=1, le=64)
    replicas: int = Field(1, ge=1, le=64)
    load: Literal["rate", "concurrency", "trace"] = "rate"
    rate: float = Field(10.0, gt=0, le=1e5)
    concurrency: int = Field(32, ge=1, le=100_000)
    lengths: Literal["fixed", "trace"] = "fixed"
    trace: Literal["azure-conv", "azure-code"] = "azure-conv"
    input_tokens: int = Field(1024, ge=1, le=1_000_000)
    output_tokens: int = Field(256, ge=1, le=1_000_000)
    num_requests: int = Field(500, ge=1, le=MAX_REQUESTS)
    seed: int = Field(0, ge=0)
    scheduler: Literal["static", "continuous", "chunked"] = "chunked"
    max_num_seqs: int = Field(256, ge=1, le=100_000)
    max_num_batched_tokens: int = Field(8192, ge=1, le=10_000_000)
    prefix_caching: bool = False
    prefix_groups: int = Field(
        0, ge=0, le=100_000
    )  # requests share one of this many prompt prefixes
    prefix_tokens: int = Field(0, ge=0, le=1_000_000)
    speculative: bool = False
    acceptance: float = Field(0.8, ge=0, le=1)
    num_speculative_tokens: int = Field(3, ge=1, le=16)
    disaggregated: bool = False
    prefill_replicas: int = Field(1, ge=1, le=64)
    decode_replicas: int = Field(1, ge=1, le=64)
    slo_ttft_s: float = Field(2.0, gt=0)
    slo_tpot_s: float = Field(0.05, gt=0)
    profile: str = "shipped"  # every command's default: the validated profile
    engine: str = ""


def config_dict(f: SimulateForm) -> dict[str, Any]:
    """The nested config ``infercast simulate``'s flags make (``commands/simulate._overrides``)."""
    from infercast.specs.catalog import hardware_names, model_names

    if f.model not in model_names():
        raise FieldError(f"unknown model {f.model!r}: pick a preset", "model")
    if f.hardware not in hardware_names():
        raise FieldError(f"unknown part {f.hardware!r}: pick a preset", "hardware")
    check_dtype(f.weights, "weights", allow=("checkpoint",))
    if f.kv_cache:
        check_dtype(f.kv_cache, "kv_cache")
    if f.load == "trace" and f.lengths != "trace":
        raise FieldError(
            "trace arrivals replay the trace's lengths too: set lengths to trace", "lengths"
        )
    trace = f.trace if f.lengths == "trace" else None
    workload: dict[str, Any] = {
        "num_requests": f.num_requests,
        "trace": trace,
        "prefix_groups": f.prefix_groups,
        "prefix_tokens": f.prefix_tokens,
    }
    if f.load == "rate":
        workload["rate"] = f.rate
    elif f.load == "concurrency":
        workload["concurrency"] = f.concurrency
    else:
        workload["arrival"] = "trace"
    if f.lengths == "fixed":
        workload["input"] = {"mean": f.input_tokens}
        workload["output"] = {"mean": f.output_tokens}
    cfg: dict[str, Any] = {
        "model": f.model,
        "hardware": f.hardware,
        "weights": f.weights,
        "kv_cache": f.kv_cache or None,
        "tp": f.tp,
        "replicas": f.replicas,
        "seed": f.seed,
        "slo_ttft_s": f.slo_ttft_s,
        "slo_tpot_s": f.slo_tpot_s,
        "scheduler": {
            "policy": f.scheduler,
            "max_num_seqs": f.max_num_seqs,
            "max_num_batched_tokens": f.max_num_batched_tokens,
            "prefix_caching": f.prefix_caching,
        },
        "workload": workload,
    }
    if f.speculative:
        cfg["speculative"] = {
            "method": "eagle",
            "acceptance": f.acceptance,
            "num_speculative_tokens": f.num_speculative_tokens,
        }
    if f.disaggregated:
        cfg["disaggregation"] = {
            "prefill": {"replicas": f.prefill_replicas},
            "decode": {"replicas": f.decode_replicas},
        }
    return cfg


def command_line(f: SimulateForm) -> str:
    """The ``infercast simulate`` command for this form."""
    a = [
        "infercast",
        "simulate",
        "--model",
        f.model,
        "--hardware",
        f.hardware,
        "--weights",
        f.weights,
    ]
    if f.kv_cache:
        a += ["--kv-cache", f.kv_cache]
    if f.tp != 1:
        a += ["--tp", str(f.tp)]
    if f.replicas != 1:
        a += ["--replicas", str(f.replicas)]
    if f.load == "rate":
        a += ["--rate", f"{f.rate:g}"]
    elif f.load == "concurrency":
        a += ["--concurrency", str(f.concurrency)]
    else:
        a += ["--workload", "trace"]
    if f.lengths == "trace":
        a += ["--trace", f.trace]
    else:
        a += ["--input-tokens", str(f.input_tokens), "--output-tokens", str(f.output_tokens)]
    a += [
        "--num-requests",
        str(f.num_requests),
        "--seed",
        str(f.seed),
        "--scheduler",
        f.scheduler,
        "--max-num-seqs",
        str(f.max_num_seqs),
        "--max-num-batched-tokens",
        str(f.max_num_batched_tokens),
    ]
    if f.prefix_caching:
        a += ["--prefix-caching"]
    if f.prefix_groups or f.prefix_tokens:
        a += ["--prefix-groups", str(f.prefix_groups), "--prefix-tokens", str(f.prefix_tokens)]
    if f.speculative:
        a += [
            "--speculative",
            "eagle",
            "--acceptance",
            f"{f.acceptance:g}",
            "--num-speculative-tokens",
            str(f.num_speculative_tokens),
        ]
    if f.disaggregated:
        a += [
            "--disaggregated",
            "--prefill-replicas",
            str(f.prefill_replicas),
            "--decode-replicas",
            str(f.decode_replicas),
        ]
    a += ["--slo-ttft-s", f"{f.slo_ttft_s:g}", "--slo-tpot-s", f"{f.slo_tpot_s:g}"]
    a += ["--profile", f.profile]  # always: the CLI's default profile may change
    if f.engine:
        a += ["--engine", f.engine]
    return shlex.join(a + ["--json"])


def _quantiles(values: np.ndarray) -> dict[str, list[float]]:
    """The sorted sample at up to CDF_POINTS evenly spaced ranks: (value, cumulative fraction)."""
    v = np.sort(values[np.isfinite(values)])
    if v.size == 0:
        return {"x": [], "p": []}
    idx = np.unique(np.linspace(0, v.size - 1, min(CDF_POINTS, v.size)).round().astype(int))
    return {"x": v[idx].tolist(), "p": ((idx + 1) / v.size).tolist()}


def _timeline(series) -> dict[str, list[float]]:
    from infercast.sim.series import FIELDS

    cols = series.arrays()
    n = len(cols[FIELDS[0]])
    step = max(1, -(-n // TIMELINE_POINTS))
    return {f: np.asarray(cols[f])[::step].tolist() for f in FIELDS}


def prepare(f: SimulateForm):
    """Validate the form into (SimConfig, step model) before the background run starts."""
    from infercast.sim.build import step_model
    from infercast.sim.config import build_config

    cfg = build_config(config_dict(f))
    profile = profile_for(f.profile, f.engine, cfg.hardware)
    try:
        return cfg, step_model(cfg, profile=profile)
    except InfercastError as exc:
        raise FieldError(str(exc), "tp") from None


def run(f: SimulateForm, cfg, timer, progress: Callable[[float], None]) -> dict[str, Any]:
    """Simulate and shape the result for the page."""
    from infercast.cost.dollars import dollars_per_million_tokens
    from infercast.metrics.summary import MetricsAccumulator
    from infercast.sim.run import simulate
    from infercast.specs.catalog import load_hardware

    acc = MetricsAccumulator(slo_ttft_s=cfg.slo_ttft_s, slo_tpot_s=cfg.slo_tpot_s)
    total = cfg.workload.num_requests
    result = simulate(cfg, timer, accumulator=acc, progress=lambda done: progress(done / total))
    d = result.to_dict()
    gpus = d.get("num_gpus") or cfg.tp * cfg.replicas
    price = load_hardware(cfg.hardware).price_per_hour
    tps = d["output_throughput_tokens_per_s"]
    try:
        itl = acc.itl_values()
    except ValueError:  # folded into a histogram on huge runs: the CDF shows TTFT/TPOT only
        itl = np.array([])
    return {
        "result": d,
        "command": command_line(f),
        "num_gpus": gpus,
        "price_per_gpu_hour": price,
        "cost_per_million_output_tokens": dollars_per_million_tokens(price, gpus, tps)
        if price and tps
        else None,
        "cdf": {
            "ttft_s": _quantiles(acc.column("ttft")),
            "tpot_s": _quantiles(acc.column("tpot")),
            "itl_s": _quantiles(np.asarray(itl)),
        },
        "timeline": _timeline(result.series),
        "slo": {"ttft_s": cfg.slo_ttft_s, "tpot_s": cfg.slo_tpot_s},
    }
