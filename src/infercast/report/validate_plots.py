"""Predicted vs measured, log-log, one colour per scenario, one panel per unit."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from infercast.report.axes import image_path, pyplot
from infercast.validate.evaluate import Prediction


def _is_time(metric: str) -> bool:
    return metric.endswith("_s") and not metric.endswith("per_s")


def _unit(metric: str) -> str:
    """The unit a metric is measured in (one panel each: a shared axis spanned 16 decades)."""
    if _is_time(metric):
        return "s"
    if "bytes_per_s" in metric:
        return "bytes/s"
    if "flops" in metric:
        return "FLOP/s"
    if metric == "speedup":
        return "ratio"
    return "tokens/s"


PANELS = (
    ("times (s)", lambda m: _unit(m) == "s"),
    ("token rates (tokens/s)", lambda m: _unit(m) == "tokens/s"),
    ("bandwidth (bytes/s)", lambda m: _unit(m) == "bytes/s"),
    ("compute (FLOP/s)", lambda m: _unit(m) == "FLOP/s"),
    ("speedups (ratio)", lambda m: _unit(m) == "ratio"),
)


def plot_predictions(preds: Sequence[Prediction], path: str | Path) -> Path:
    """Write the scatter to ``path`` (.png/.svg/.pdf); the diagonal and +-25 % bands are drawn."""
    out = image_path(path)
    plt = pyplot()
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    done = [p for p in preds if p.predicted is not None]
    scenarios = sorted({p.case.scenario for p in done})
    colours = dict(zip(scenarios, plt.cm.tab10.colors, strict=False))
    panels = [(t, k) for t, k in PANELS if any(k(p.case.metric) for p in done)] or list(PANELS[:1])
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.6 * rows), squeeze=False)
    axes = grid.ravel()
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    for ax, (title, keep) in zip(axes, panels, strict=False):
        pts = [p for p in done if keep(p.case.metric)]
        for sc in scenarios:
            xs = [p.case.value for p in pts if p.case.scenario == sc]
            ys = [p.predicted for p in pts if p.case.scenario == sc]
            if xs:
                ax.scatter(xs, ys, s=9, alpha=0.6, color=colours[sc], label=f"{sc} ({len(xs)})")
        if pts:
            vals = [p.case.value for p in pts] + [p.predicted for p in pts]
            line = np.logspace(np.log10(min(vals)) - 0.2, np.log10(max(vals)) + 0.2, 50)
            ax.plot(line, line, "k-", lw=0.8)
            for f in (0.75, 1.25):
                ax.plot(line, line * f, "k:", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        narrow = bool(pts) and max(vals) / min(vals) < 30
        for axis in (
            ax.xaxis,
            ax.yaxis,
        ):  # a panel under a decade labels its minor ticks: they overlap
            axis.set_minor_formatter(NullFormatter())
            if narrow:  # 1-2-5 ticks in plain numbers where powers of ten alone leave one label
                axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.set_xlabel("measured")
        ax.set_ylabel("predicted")
        ax.set_title(title)
        if pts:
            ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.2)
    fig.suptitle(f"infercast validate: {len(done)} of {len(preds)} rows predicted (dotted: +-25 %)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
