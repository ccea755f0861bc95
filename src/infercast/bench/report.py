"""Bench outputs: a Rich table, per-request JSONL, and plots (latency CDFs, latency vs load)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from infercast.bench.run import BenchResult


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:,.{digits}f}"


def _hits(s) -> str:
    """Prefix-cache hit rates of the requests whose server reported cached tokens."""
    if not s.cache_known:
        return "not reported by the server"
    return (
        f"{_f(100 * s.prefix_hit_rate_tokens, 1)}% / {_f(100 * s.prefix_hit_rate_requests, 1)}%"
        f" ({s.cache_known} of {s.completed} reported)"
    )


def result_table(result: BenchResult) -> Table:
    """One run: counts, throughput, and each latency's mean/median/p90/p99 in ms."""
    s, d = result.summary, result.to_json()
    unit = "sessions/s" if result.config.multi_turn else "req/s"
    label = (
        f"rate {result.config.request_rate} {unit}"
        if result.config.request_rate
        else f"concurrency {result.config.concurrency}"
        if result.config.concurrency
        else "trace replay"
    )
    t = Table(title=f"infercast bench: {result.config.model} at {label}", title_justify="left")
    t.add_column("metric")
    for col in ("mean", "median", "p90", "p99"):
        t.add_column(col, justify="right")
    for name, dist in (
        ("TTFT (ms)", s.ttft),
        ("TPOT (ms)", s.tpot),
        ("ITL per token (ms)", s.itl),
        ("ITL per chunk (ms)", s.itl_chunk),
        ("E2E (ms)", s.e2e),
        ("send lag (ms)", s.send_lag),
    ):
        if dist.count:
            t.add_row(
                name,
                *(
                    _f(v * 1e3)
                    for v in (
                        dist.mean,
                        dist.median,
                        dist.percentiles.get(90.0),
                        dist.percentiles.get(99.0),
                    )
                ),
            )
    t.add_section()
    rows = [
        ("completed / failed", f"{s.completed} / {s.failed + s.rejected}"),
        ("duration (s)", _f(s.duration_s)),
        ("requests/s", _f(s.request_throughput_rps)),
        ("output tokens/s", _f(s.output_throughput_tps)),
        ("output tokens (source)", f"{s.total_output_tokens} ({s.token_count_source})"),
        ("achieved concurrency", _f(d["achieved_concurrency"], 1)),
        ("tokens per chunk", _f(s.tokens_per_chunk)),
        ("prefix cache hits: tokens / requests", _hits(s)),
    ]
    if s.goodput_rps is not None:
        rows.append(
            (
                "goodput req/s (SLO met)",
                f"{_f(s.goodput_rps)} ({_f((s.slo_attainment or 0) * 100, 1)}%)",
            )
        )
    if s.failure_reasons:
        rows.append(("failures", ", ".join(f"{k}: {v}" for k, v in s.failure_reasons.items())))
    if d["token_count_mismatches"]:
        rows.append(("token count mismatches", str(d["token_count_mismatches"])))
    for k, v in rows:
        t.add_row(k, v, "", "", "")
    return t


def print_result(result: BenchResult, console: Console) -> None:
    """The table, then any client-bottleneck warning in a red panel."""
    console.print(result_table(result))
    if result.warnings:
        console.print(
            Panel(
                "\n".join(result.warnings),
                title="WARNING: the client may be the bottleneck (numbers less certain)",
                border_style="bold red",
            )
        )


def dollars_line(d: dict) -> str:
    """GPU-hours, $/hour and $/M input and output tokens of a run (``bench/dollars.py``)."""

    def usd(x: float | None) -> str:
        return "-" if x is None else f"${x:,.3f}"

    return (
        f"cost: {d['gpus']} GPU x ${d['price_per_gpu_hour']:,.2f}/GPU-hour ({d['price_source']}): "
        f"{d['gpu_hours']:,.4f} GPU-hours, {usd(d['usd_per_hour'])}/hour, {usd(d['usd'])} for the "
        f"run; $/M tokens in {usd(d['usd_per_million_input_tokens'])}, out "
        f"{usd(d['usd_per_million_output_tokens'])}"
    )


def sweep_table(results: Sequence[BenchResult]) -> Table:
    """One row per sweep point: load, throughput, TTFT and TPOT median/p99."""
    t = Table(title="infercast bench sweep", title_justify="left")
    for col in (
        "load",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "failed",
        "client ok",
    ):
        t.add_column(col, justify="right")
    for r in results:
        s = r.summary
        load = (
            f"{r.config.request_rate} req/s"
            if r.config.request_rate
            else f"C={r.config.concurrency}"
        )
        t.add_row(
            load,
            _f(s.request_throughput_rps),
            _f(s.output_throughput_tps, 0),
            _f(s.ttft.median * 1e3),
            _f(s.ttft.percentiles[99.0] * 1e3),
            _f(s.tpot.median * 1e3),
            _f(s.tpot.percentiles[99.0] * 1e3),
            str(s.failed + s.rejected),
            "no" if r.warnings else "yes",
        )
    return t


def write_jsonl(results: Sequence[BenchResult], path: str) -> None:
    """Every measured request as one JSON line (the RequestRecord fields, plus the run's load)."""
    with Path(path).open("w") as fh:
        for r in results:
            for rec in r.records:
                row = dataclasses.asdict(rec)
                row["load"] = {
                    "request_rate": r.config.request_rate,
                    "concurrency": r.config.concurrency,
                }
                fh.write(json.dumps(row) + "\n")


def plot(results: Sequence[BenchResult], path: str) -> None:
    """Latency CDFs of each run, and TTFT/TPOT vs load when there is more than one run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = len(results) > 1
    fig, axes = plt.subplots(1, 5 if sweep else 4, figsize=(22 if sweep else 18, 4))
    for r in results:
        label = (
            f"{r.config.request_rate} req/s"
            if r.config.request_rate
            else f"C={r.config.concurrency}"
        )
        ok = [x for x in r.records if x.ok]
        series = {
            "TTFT": [x.ttft_s for x in ok],
            "TPOT": [x.tpot_s for x in ok],
            "E2E": [x.e2e_s for x in ok],
            "ITL per chunk": _chunk_gaps(ok),
        }
        for ax, (name, vals) in zip(axes, series.items(), strict=False):
            v = np.sort([x for x in vals if x is not None]) * 1e3
            if v.size:
                ax.plot(v, np.arange(1, v.size + 1) / v.size, label=label)
            ax.set(title=f"{name} CDF", xlabel="ms", ylabel="fraction")
    if sweep:
        ax = axes[-1]
        x = [r.summary.request_throughput_rps for r in results]
        for name, key in (("TTFT", "ttft"), ("TPOT", "tpot")):
            dist = [getattr(r.summary, key) for r in results]
            ax.plot(x, [d.median * 1e3 for d in dist], "o-", label=f"{name} p50")
            ax.plot(x, [d.percentiles[99.0] * 1e3 for d in dist], "s--", label=f"{name} p99")
        ax.set(title="latency vs achieved load", xlabel="requests/s", ylabel="ms", yscale="log")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _chunk_gaps(records: list) -> list[float]:
    return [float(g) for r in records for g in np.diff(np.asarray(r.chunk_times_s))]
