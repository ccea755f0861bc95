"""``infercast plan``: the cheapest serving configuration that meets a latency SLO at a rate.

``PlanRequest`` (the question) -> ``plan(request, executor)`` -> ``Plan`` (best,
alternatives and why they lost, or the closest miss) and ``pareto_points`` /
``pareto_frontier`` for the throughput-per-GPU vs tokens-per-second-per-user chart
(drawn by ``report.plan_plots.plot_pareto``).
"""

from infercast.plan.pareto import pareto_frontier, pareto_points
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
]
