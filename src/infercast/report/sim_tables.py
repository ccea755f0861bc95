"""What ``infercast simulate`` prints: each run's latencies, throughput, cache, cost and energy
side by side (one column per run of a sweep; a disaggregated run shows both pools), and the
what-if table of ``--what-if``."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from infercast.sim.config import SimConfig


def _ms(v) -> str:
    return "-" if v is None else f"{v * 1e3:,.1f}"


def _num(v, fmt: str = ",.2f") -> str:
    return "-" if v is None or v != v else format(v, fmt)


_ROWS = (
    ("completed / rejected", lambda d: f"{d['num_completed']:,} / {d['num_rejected']:,}"),
    ("duration (s)", lambda d: _num(d["duration_s"], ",.1f")),
    ("requests/s", lambda d: _num(d["request_throughput_per_s"])),
    ("output tokens/s", lambda d: _num(d["output_throughput_tokens_per_s"], ",.0f")),
    ("goodput (req/s at SLO)", lambda d: _num(d["goodput_per_s"])),
    *(
        (f"{name} {q} (ms)", lambda d, k=key, q=q: _ms(d[k][q]))
        for name, key in (
            ("TTFT", "ttft_s"),
            ("TPOT", "tpot_s"),
            ("ITL", "itl_s"),
            ("E2E", "e2e_s"),
        )
        for q in ("mean", "p50", "p90", "p99")
    ),
    ("queueing p99 (ms)", lambda d: _ms(d["queueing_s"]["p99"])),
    ("mean batch (seqs)", lambda d: _num(d["mean_batch_size"], ",.1f")),
    (
        "KV used: mean / peak",
        lambda d: (
            f"{_num(100 * d['mean_kv_usage'], '.0f')}% / {_num(100 * d['peak_kv_usage'], '.0f')}%"
        ),
    ),
    ("preemptions", lambda d: f"{d['num_preemptions']:,}"),
    (
        "prefix cache hits: tokens / requests",
        lambda d: f"{_pct(d['prefix_hit_rate_tokens'])} / {_pct(d['prefix_hit_rate_requests'])}",
    ),
    (
        "GPU-hours / $ per hour",
        lambda d: f"{_num(d.get('gpu_hours'), ',.3f')} / {_usd(d.get('usd_per_hour'))}",
    ),
    (
        "$/M tokens in / out",
        lambda d: (
            f"{_usd(d.get('usd_per_million_input_tokens'))} / "
            f"{_usd(d.get('usd_per_million_output_tokens'))}"
        ),
    ),
    (
        "energy (kWh) / avg W",
        lambda d: f"{_num(d.get('energy_kwh'), ',.4f')} / {_num(d.get('average_power_w'), ',.0f')}",
    ),
    (
        "J per output token / request",
        lambda d: (
            f"{_num(d.get('joules_per_output_token'), ',.3f')} / "
            f"{_num(d.get('joules_per_request'), ',.1f')}"
        ),
    ),
)


def _pct(v) -> str:
    return "-" if v is None or v != v else f"{100 * v:.1f}%"


def _usd(v) -> str:
    return "-" if v is None or v != v else f"${v:,.3f}"


def _system(cfg) -> str:
    """What served the requests: replicas of one part, or the prefill and decode pools."""
    if cfg.disaggregation is None:
        return f"{cfg.hardware} x{cfg.replicas} replica(s) (TP {cfg.tp})"
    pools = []
    for name in ("prefill", "decode"):
        p = getattr(cfg.disaggregation, name)
        pools.append(f"{p.replicas} x {p.hardware or cfg.hardware} TP {p.tp or cfg.tp} {name}")
    return "disaggregated: " + " + ".join(pools)


# A disaggregated run: the batch and KV rows show both pools, and the KV transfer has its own row.
_DISAGG_ROWS = (
    *(
        row
        for row in _ROWS
        if row[0] not in ("mean batch (seqs)", "KV used: mean / peak", "preemptions")
    ),
    ("GPUs (prefill + decode)", lambda d: f"{d['num_gpus']:,}"),
    (
        "mean batch: prefill / decode",
        lambda d: (
            f"{_num(d['mean_batch_size'], ',.1f')} / {_num(d['decode_mean_batch_size'], ',.1f')}"
        ),
    ),
    (
        "KV peak: prefill / decode",
        lambda d: (
            f"{_num(100 * d['peak_kv_usage'], '.0f')}% / "
            f"{_num(100 * d['decode_peak_kv_usage'], '.0f')}%"
        ),
    ),
    (
        "preemptions: prefill / decode",
        lambda d: f"{d['num_preemptions']:,} / {d['decode_num_preemptions']:,}",
    ),
    ("KV transfer mean (ms)", lambda d: _ms(d["kv_transfer_s_mean"])),
)


def print_runs(
    runs: Sequence[tuple], dicts: Sequence[dict], cfg: SimConfig, console: Console
) -> None:
    """The runs side by side (``runs``: (label, SimResult, ...) tuples; ``dicts``: each run's
    JSON dict), titled with the system ``cfg`` describes, and the simulator's own speed."""
    experts = f" + {cfg.experts} experts" if cfg.experts else ""
    title = (
        f"simulate: {cfg.model} ({cfg.weights}{experts}, KV {cfg.kv_cache or '16-bit'}) on "
        f"{_system(cfg)}, {cfg.scheduler.policy} scheduler"
    )
    t = Table()  # the title goes on its own line: a table of one or two runs is narrower than it
    t.add_column("metric")
    for label, *_ in runs:
        t.add_column(label, justify="right")
    for name, get in _DISAGG_ROWS if cfg.disaggregation is not None else _ROWS:
        t.add_row(name, *(get(d) for d in dicts))
    console.print(title)
    console.print(t)
    total = sum(run[1].summary.total for run in runs)
    cpu = sum(run[1].cpu_s for run in runs)
    console.print(
        f"simulated {total:,} requests in {cpu:,.2f} CPU-s "
        f"({total / max(cpu, 1e-9):,.0f} requests per CPU-second); "
        "metric definitions: docs/metrics.md"
    )


def what_if_table(rows: list[dict]) -> Table:
    """``simulate --what-if``: each lever's run beside the first; a lever that failed keeps
    its row, its reason goes in the caption."""
    t = Table(title="what-if: the same workload with one lever moved (first run's load)")
    for col in (
        "lever",
        "GPUs",
        "KV blocks",
        "mean batch",
        "tok/s",
        "tok/s/GPU",
        "TTFT p99 (ms)",
        "TPOT p99 (ms)",
    ):
        t.add_column(col, justify="left" if col == "lever" else "right")
    failed = []
    for r in rows:
        if "error" in r:  # the row keeps its place; the reason goes under the table, whole
            failed.append(f"not evaluated: {r['lever']}: {r['error']}")
            t.add_row(r["lever"], *["-"] * 7)
            continue
        t.add_row(
            r["lever"],
            str(r["num_gpus"]),
            f"{r['num_kv_blocks']:,}",
            _num(r["mean_batch_size"], ",.1f"),
            _num(r["output_throughput_tokens_per_s"], ",.0f"),
            _num(r["output_throughput_per_gpu"], ",.0f"),
            _ms(r["ttft_p99_s"]),
            _ms(r["tpot_p99_s"]),
        )
    if failed:
        t.caption, t.caption_justify = "\n".join(failed), "left"
    return t
