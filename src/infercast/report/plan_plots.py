"""``plan --plot``: every simulated point, throughput per GPU against tokens/s per user, with
the Pareto frontier (``plan.pareto``) and the chosen configuration starred."""

from __future__ import annotations

from infercast.plan.pareto import pareto_frontier, pareto_points
from infercast.plan.search import Plan


def plot_pareto(p: Plan, path: str) -> None:
    """Scatter of every point, the frontier as a line, the chosen configuration marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = pareto_points(p)
    front = pareto_frontier(pts)
    fig, ax = plt.subplots(figsize=(9.5, 5))
    for ok, color, name in ((True, "tab:green", "meets SLO"), (False, "tab:gray", "misses SLO")):
        sel = [d for d in pts if d["meets_slo"] == ok]
        ax.scatter(
            [d["tokens_per_s_per_user"] for d in sel],
            [d["throughput_per_gpu"] for d in sel],
            s=14,
            alpha=0.6,
            color=color,
            label=name,
        )
    ax.plot(
        [d["tokens_per_s_per_user"] for d in front],
        [d["throughput_per_gpu"] for d in front],
        color="tab:blue",
        label="Pareto frontier",
    )
    best = p.best
    if best is not None:
        pt = best.point
        ax.scatter(
            [1.0 / pt.tpot_mean_s],
            [pt.output_tokens_per_s / pt.num_gpus],
            marker="*",
            s=180,
            color="tab:red",
            label=f"plan: {best.candidate.label()}",
            zorder=5,
        )
    slo = p.request.slo_tpot_p99_s
    ax.axvline(
        1.0 / slo,
        color="tab:red",
        ls="--",
        lw=1,
        label=f"TPOT SLO {slo * 1e3:g} ms (p99; as 1/TPOT)",
    )
    ax.set_xlabel("tokens/s per user (1 / mean TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{p.request.model} at {p.request.rate:g} req/s")
    # Outside the axes: the legend never covers the chosen configuration.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
