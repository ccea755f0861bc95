"""``infercast plan``: the cheapest serving configuration that meets a latency SLO at a rate.

``PlanRequest`` (the question) -> ``plan(request, executor)`` -> ``Plan`` (best,
alternatives and why they lost, or the closest miss) and ``pareto_points`` /
``plot_pareto`` for the throughput-per-GPU vs tokens-per-second-per-user chart.
"""

from infercast.plan.pareto import pareto_frontier, pareto_points, plot_pareto
from infercast.plan.search import Option, Plan, plan
from infercast.plan.space import Candidate, PlanRequest

__all__ = [
    "Candidate",
    "Option",
    "Plan",
    "PlanRequest",
    "pareto_frontier",
    "pareto_points",
    "plan",
    "plot_pareto",
]
