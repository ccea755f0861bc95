"""Predicted vs measured, log-log, one colour per scenario, one panel per kind of unit."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from infercast.errors import ConfigError
from infercast.validate.evaluate import Prediction


def _is_time(metric: str) -> bool:
    return metric.endswith("_s") and not metric.endswith("per_s")


PANELS = (("times (s)", _is_time), ("rates (tokens/s, bytes/s, FLOP/s) and ratios", lambda m: not _is_time(m)))


def plot_predictions(preds: Sequence[Prediction], path: str | Path) -> Path:
    """Write the scatter to ``path`` (.png/.svg/.pdf); the diagonal and +-25 % bands are drawn."""
    out = Path(path)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ConfigError(f"--plot {path!r}: use a .png, .svg or .pdf file name")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    done = [p for p in preds if p.predicted is not None]
    scenarios = sorted({p.case.scenario for p in done})
    colours = dict(zip(scenarios, plt.cm.tab10.colors, strict=False))
    fig, axes = plt.subplots(1, 2, figsize=(13, 6))
    for ax, (title, keep) in zip(axes, PANELS, strict=True):
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
        ax.set_xlabel("measured (SI units)")
        ax.set_ylabel("predicted (SI units)")
        ax.set_title(title)
        if pts:
            ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.2)
    fig.suptitle(f"infercast validate: {len(done)} of {len(preds)} rows predicted (dotted: +-25 %)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
