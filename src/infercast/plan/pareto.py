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
