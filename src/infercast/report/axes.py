"""Axis helpers shared by the plots: readable latency ticks and SLO lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infercast.errors import ConfigError

IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only: no display is needed or opened)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def image_path(path: str | Path) -> Path:
    """``path`` as a Path if it names an image format the plots write, else a ConfigError."""
    out = Path(path)
    if out.suffix.lower() not in IMAGE_SUFFIXES:
        raise ConfigError(f"`path` {str(path)!r}: use a .png, .svg or .pdf file name")
    return out


def latency_axis(ax, values_ms: np.ndarray, which: str = "x") -> None:
    """Log scale only when the values span more than a decade; otherwise linear with a few ticks.

    A log axis over, say, 6.7-7.1 ms labels its minor ticks and the labels overlap; a narrow
    range reads better linear. Wide ranges keep log with plain numbers and unlabeled minors (1, 2, 5
    of each decade labelled when the span is under two decades, so such an axis has more than one
    label).
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    v = np.asarray(values_ms, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size and v.max() / v.min() > 10:
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
        if v.max() / v.min() < 100:  # one or two decades: label 1, 2, 5 of each, not one tick alone
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        axis.set_minor_formatter(NullFormatter())
    else:
        axis.set_major_locator(MaxNLocator(nbins=5))


def slo_line(ax, limit_ms: float | None, which: str = "x") -> None:
    """A dashed red line at an SLO limit (milliseconds), labelled, when one is given."""
    if limit_ms is None:
        return
    line = ax.axvline if which == "x" else ax.axhline
    line(limit_ms, color="tab:red", ls="--", lw=1, label=f"SLO {limit_ms:g} ms")
