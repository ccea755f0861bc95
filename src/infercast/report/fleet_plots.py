"""Fleet-day plots: each policy's cost vs SLO attainment, and replicas / load / SLO over the day."""

from __future__ import annotations

from pathlib import Path

from infercast.report.axes import pyplot


def plot_policies(runs: dict[str, dict], path: str, title: str) -> None:
    """Left: $ per day vs SLO attainment, one point per policy. Right: replicas and arrival rate
    per tick for each policy, and the per-tick SLO attainment."""
    plt = pyplot()
    fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 4.8))
    for i, (name, out) in enumerate(runs.items()):
        d = out["day"]
        cost = d["usd_per_day"] if d["usd_per_day"] is not None else d["replica_hours"]
        ax.scatter([cost], [100 * (d["slo_attainment"] or 0)], s=60)
        ax.annotate(
            name,
            (cost, 100 * (d["slo_attainment"] or 0)),
            textcoords="offset points",
            xytext=(5, 5 - 12 * i),
        )
        hours = [r["t_s"] / 3600 for r in out["ticks"]]
        ax2.step(
            hours,
            [r["replicas_ready"] + r["replicas_starting"] for r in out["ticks"]],
            where="post",
            label=name,
        )
        ax3.plot(
            hours,
            [
                100 * r["slo_attainment"] if r["slo_attainment"] is not None else float("nan")
                for r in out["ticks"]
            ],
            lw=0.8,
            label=name,
        )
    first = next(iter(runs.values()))["ticks"]
    member = next(iter(runs.values()))["day"].get("member", "replica")  # disaggregated: "unit"
    rate_ax = ax2.twinx()
    rate_ax.plot(
        [r["t_s"] / 3600 for r in first],
        [r["arrival_rate_per_s"] for r in first],
        color="grey",
        lw=0.7,
        alpha=0.6,
    )
    rate_ax.set_ylabel("arrivals (req/s, grey)")
    ax.set(
        xlabel="$ per day" if first and first[0]["usd"] is not None else f"{member}-hours",
        ylabel="SLO attainment (%)",
        title="cost vs SLO attainment",
    )
    ax2.set(
        xlabel="hour of the day",
        ylabel=f"{member}s (ready + starting)",
        title=f"{member}s over the day",
    )
    ax3.set(
        xlabel="hour of the day",
        ylabel="SLO attainment per tick (%)",
        title="SLO attainment over the day",
    )
    ax2.legend(fontsize=7)
    ax3.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
