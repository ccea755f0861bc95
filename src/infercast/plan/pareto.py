"""The Pareto frontier of throughput per GPU against tokens/s per user.

Every simulated (candidate, unit count) is one point: x = tokens/s each user
sees (1 / mean TPOT), y = output tokens/s per GPU of the fleet. A point is on
the frontier when no other point is at least as good on both axes and better
on one: the chart serving papers use to compare configurations (more users
per GPU costs speed per user).
"""

from __future__ import annotations

from infercast.plan.search import Plan


def pareto_points(p: Plan) -> list[dict]:
    """Every simulated point as {label, num_gpus, tokens_per_s_per_user, throughput_per_gpu,
    meets_slo}."""
    out = []
    for r in p.results.values():
        for pt in r.points:
            if pt.tpot_mean_s > 0 and pt.output_tokens_per_s > 0:
                out.append(
                    {
                        "label": r.candidate.label(),
                        "num_gpus": pt.num_gpus,
                        "meets_slo": pt.meets,
                        "tokens_per_s_per_user": 1.0 / pt.tpot_mean_s,
                        "throughput_per_gpu": pt.output_tokens_per_s / pt.num_gpus,
                    }
                )
    return out


def pareto_frontier(points: list[dict]) -> list[dict]:
    """The non-dominated points, by tokens/s per user descending."""
    pts = sorted(points, key=lambda d: (-d["tokens_per_s_per_user"], -d["throughput_per_gpu"]))
    front, best_y = [], float("-inf")
    for d in pts:
        if d["throughput_per_gpu"] > best_y:
            front.append(d)
            best_y = d["throughput_per_gpu"]
    return front


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
