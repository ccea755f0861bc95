"""Bench plots: latency CDFs of each run, and TTFT/TPOT against the achieved load of a sweep."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.bench.run import BenchResult


def plot_bench(results: Sequence[BenchResult], path: str) -> None:
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
