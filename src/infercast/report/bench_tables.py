"""Bench tables: one run's counts, throughput and latencies; a sweep; its dollars; and the
measured-vs-simulated comparison of ``bench --compare-sim`` (rows from ``bench.compare``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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
        f"{d['gpu_hours']:,.4f} GPU-hours, {usd(d['usd_per_hour'])}/hour, "
        f"{usd(d['usd'])} for the run; "
        f"$/M tokens in {usd(d['usd_per_million_input_tokens'])}, "
        f"out {usd(d['usd_per_million_output_tokens'])}"
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


def comparison_table(rows: list[dict[str, Any]], sim_label: str) -> Table:
    """Measured vs predicted, side by side (``rows``: ``bench.compare.comparison``)."""
    t = Table(title=f"measured vs simulated ({sim_label})", title_justify="left")
    for col in ("metric", "measured", "predicted", "pred / meas"):
        t.add_column(col, justify="right" if col != "metric" else "left")
    for r in rows:
        fmt = [
            ("-" if r[k] is None else f"{r[k]:,.2f}")
            for k in ("measured", "predicted", "predicted_over_measured")
        ]
        t.add_row(r["metric"], *fmt)
    return t
