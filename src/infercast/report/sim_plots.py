"""Plots of simulation runs: latency CDFs, TTFT/TPOT vs rate, batch and KV timeline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from infercast.metrics.summary import MetricsAccumulator
from infercast.report.axes import latency_axis, pyplot, slo_line
from infercast.sim.run import SimResult


def plot_runs(
    runs: Sequence[tuple[str, SimResult, MetricsAccumulator]],
    xs: Sequence[float | None],
    directory: str | Path,
    x_name: str = "rate",
) -> list[Path]:
    """Write ``latency_cdf.png``, ``timeline.png`` and, for sweeps, ``vs_<x_name>.png``."""
    plt = pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = [
        _cdfs(plt, runs, out / "latency_cdf.png"),
        _timeline(plt, runs[-1], out / "timeline.png"),
    ]
    if len(runs) > 1 and all(x is not None for x in xs):
        written.append(_vs_x(plt, runs, xs, x_name, out / f"vs_{x_name}.png"))
    return written


def _slos_ms(runs) -> dict[str, float | None]:
    """The SLO limits of the runs (ms), by metric."""
    acc = runs[0][2]
    return {
        "ttft": acc.slo_ttft_s * 1e3 if acc.slo_ttft_s else None,
        "tpot": acc.slo_tpot_s * 1e3 if acc.slo_tpot_s else None,
        "e2e": None,
    }


def _cdfs(plt, runs, path: Path) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    seen: dict[str, list[np.ndarray]] = {"ttft": [], "tpot": [], "e2e": []}
    for label, _, acc in runs:
        for ax, col in zip(axes, ("ttft", "tpot", "e2e"), strict=True):
            v = np.sort(acc.column(col))
            v = v[~np.isnan(v)]
            if v.size:
                ax.plot(v * 1e3, np.arange(1, v.size + 1) / v.size, label=label)
                seen[col].append(v * 1e3)
    slos = _slos_ms(runs)
    for ax, (col, name) in zip(
        axes, (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")), strict=True
    ):
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylabel("fraction of requests")
        latency_axis(ax, np.concatenate(seen[col] + [np.array([slos[col] or np.nan])]))
        slo_line(ax, slos[col])
        ax.grid(alpha=0.3)
        if slos[col] is not None or ax is axes[0]:
            ax.legend(fontsize=8)
    fig.suptitle("latency CDFs (vLLM bench serve definitions)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _timeline(plt, run, path: Path) -> Path:
    label, result, _ = run
    cols = result.series.arrays()
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    for rep in np.unique(cols["replica"]) if cols["replica"].size else []:
        m = cols["replica"] == rep
        ax.plot(cols["time_s"][m], cols["batch_size"][m], lw=0.8, label=f"replica {rep} batch")
        ax.plot(
            cols["time_s"][m],
            cols["num_waiting"][m],
            lw=0.8,
            ls="--",
            label=f"replica {rep} waiting",
        )
        ax2.plot(
            cols["time_s"][m], cols["kv_usage"][m] * 100, lw=0.8, label=f"replica {rep} KV used"
        )
    ax.set_ylabel("requests")
    ax.legend(fontsize=8)
    ax2.set_ylabel("KV blocks in use (%)")
    ax2.set_xlabel("simulated time (s)")
    ax2.set_ylim(0, 105)
    fig.suptitle(f"batch, queue and KV over time ({label}; preemptions: {result.num_preemptions})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _vs_x(plt, runs, xs, x_name: str, path: Path) -> Path:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    for key, name, axis in (("ttft", "TTFT", ax), ("tpot", "TPOT", ax2)):
        for q, style in ((50, "o-"), (99, "s--")):
            ys = [getattr(r.summary, key).percentiles[float(q)] * 1e3 for _, r, _ in runs]
            axis.plot(xs, ys, style, label=f"p{q}")
        slo_line(axis, _slos_ms(runs)[key], which="y")
        axis.set_xlabel(
            "request rate (req/s)" if x_name == "rate" else "concurrency (requests in flight)"
        )
        axis.set_ylabel(f"{name} (ms)")
        latency_axis(
            axis,
            np.array(
                [
                    getattr(r.summary, key).percentiles[float(q)] * 1e3
                    for _, r, _ in runs
                    for q in (50, 99)
                ]
            ),
            which="y",
        )
        axis.grid(alpha=0.3)
        axis.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
