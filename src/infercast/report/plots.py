"""Plots: the roofline of a part with the step's ops placed on it, and throughput vs batch."""

from __future__ import annotations

from pathlib import Path

from infercast.estimate import Estimate
from infercast.report.axes import image_path, pyplot


def _label_clusters(
    points: list[tuple[float, float, str]], decades: float = 0.25
) -> list[tuple[float, float, str]]:
    """One label per group of points closer than ``decades`` on both log axes (names joined),
    so ops that sit on top of each other (the matmuls) do not print their names over each other."""
    import math

    groups: list[list[tuple[float, float, str]]] = []
    for p in sorted(points):
        for g in groups:
            if (
                abs(math.log10(p[0] / g[0][0])) < decades
                and abs(math.log10(p[1] / g[0][1])) < decades
            ):
                g.append(p)
                break
        else:
            groups.append([p])
    out = []
    for g in groups:
        names = list(dict.fromkeys(n for *_, n in g))
        text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        out.append((max(x for x, _, _ in g), g[0][1], text))
    return out


def plot_estimate(est: Estimate, path: str | Path) -> Path:
    """Two panels: roofline with prefill/decode ops, and tokens/s vs batch."""
    import numpy as np

    plt = pyplot()
    out = image_path(path)
    mach = est.step_model.machine
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    x = np.logspace(-1, 4, 200)
    ax.loglog(
        x,
        np.minimum(mach.peak_flops, x * mach.bandwidth),
        "k-",
        lw=2,
        label=f"roofline ({mach.compute_dtype})",
    )
    ridge = mach.peak_flops / mach.bandwidth
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.text(ridge, mach.peak_flops * 0.3, f" ridge {ridge:,.0f} FLOP/B", color="grey")
    points = [("prefill", est.prefill, "o")] + [
        (f"decode b={d.batch}", d.cost, "s") for d in est.decode[:: max(1, len(est.decode) // 3)]
    ]
    named: list[tuple[float, float, str]] = []
    for i, (label, cost, marker) in enumerate(points):
        ops = [o for o in cost.ops if o.op.flops > 0 and o.op.kind != "comm"]
        xs = [o.op.intensity for o in ops]
        ys = [o.op.flops / o.time_s for o in ops]
        ax.scatter(xs, ys, marker=marker, alpha=0.7, label=label)
        if i in (0, len(points) - 1):  # name the ops of prefill and of the largest decode batch
            named += [(x, y, o.op.name) for o, x, y in zip(ops, xs, ys, strict=True)]
    for x, y, text in _label_clusters(named):
        ax.annotate(
            text,
            (x, y),
            xytext=(5, 0),
            textcoords="offset points",
            fontsize=6,
            alpha=0.85,
            va="center",
        )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s (expected)")
    ax.set_title(f"{est.hardware.name}: ops of {est.model.name}")
    ax.legend(fontsize=8)
    b = [d.batch for d in est.decode]
    ax2.plot(b, [d.tokens_per_s for d in est.decode], "o-", label="tokens/s (expected)")
    ax2.plot(
        b, [d.batch / d.floor_step_time_s for d in est.decode], "x--", label="tokens/s (floor)"
    )
    for d in est.decode:
        if not d.fits:
            ax2.scatter([d.batch], [d.tokens_per_s], color="red", zorder=3)
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("batch (red: does not fit)")
    ax2.set_ylabel("output tokens/s per replica")
    ax2.set_title(f"decode at context {est.context}")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
