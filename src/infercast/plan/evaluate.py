"""One candidate's evaluation: the fewest units that meet the SLO at the rate (pure, picklable).

A fleet of ``u`` units behind a router at rate R is simulated as one unit at
rate R/u: random routing splits a Poisson stream into independent Poisson
streams of rate R/u (thinning), and round-robin only smooths arrivals, so this
is slightly conservative. The SLO (p99 TTFT and TPOT, every request served)
improves as u grows, so u is found by doubling then bisection, each step one
fast-mode simulation. Runs with speculative decoding are exact-mode (see
``infercast.sim.speculative``).

A short run can look fine while the queue is still growing: requests live for
tens of seconds, so a few hundred arrivals at an unsustainable rate all finish
before the backlog shows in p99. Two guards make a point mean steady state:
the unit's saturated capacity (an offline run: every request at t=0, enough
of them to fill the batch several times over) must cover the offered rate,
and each run holds at least three saturated residence times of arrivals
(Little's law: ``rate x W`` requests are in the system, so ``3 rate W``
arrivals replace them three times over), more than ``num_requests`` if need be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infercast.errors import InfercastError
from infercast.plan.space import Candidate, PlanRequest


@dataclass(frozen=True)
class Point:
    """One simulated unit count of a candidate."""

    units: int
    num_gpus: int
    ttft_p99_s: float
    tpot_p99_s: float
    tpot_mean_s: float
    output_tokens_per_s: float  # whole fleet
    completed: int
    num_requests: int
    miss: float  # max(ttft/slo, tpot/slo); <= 1 meets (when every request completed)
    utilization: float = 0.0  # offered request rate / the unit's saturated capacity
    joules_per_output_token: float = math.nan  # sim/economics.py; nan: not modelled (disaggregated)
    power_w: float = math.nan  # the whole fleet's average power

    @property
    def stable(self) -> bool:
        """The unit can sustain the offered rate (else the queue grows without bound)."""
        return self.utilization <= 1.0

    @property
    def meets(self) -> bool:
        return self.completed == self.num_requests and self.miss <= 1.0 and self.stable


@dataclass(frozen=True)
class Capacity:
    """One unit saturated: request throughput and the time a request spends in service."""

    requests_per_s: float
    residence_s: float  # mean E2E minus queueing, every slot busy

    def num_requests(self, rate: float, floor: int, ceiling: int = 50_000) -> int:
        """Requests to simulate at ``rate``: ``floor``, or three residence times of arrivals
        (just ``floor`` when the saturated run measured no residence time)."""
        if not math.isfinite(self.residence_s):
            return floor
        return int(min(ceiling, max(floor, math.ceil(3.0 * rate * self.residence_s))))


@dataclass(frozen=True)
class CandidateResult:
    """What the search learned about one candidate."""

    candidate: Candidate
    best: Point | None  # the fewest units meeting the SLO
    closest: Point | None  # when none does: the largest fleet tried
    points: tuple[Point, ...] = ()
    error: str | None = None  # e.g. the weights do not fit


def sim_config(
    cand: Candidate,
    req: PlanRequest,
    units: int,
    num_requests: int | None = None,
    offline: bool = False,
) -> dict:
    """The simulator config (nested dict) of one unit at its share of the rate (or saturated)."""
    wl: dict = {"num_requests": num_requests or req.num_requests}
    wl.update({"arrival": "offline"} if offline else {"rate": req.rate / units})
    if req.trace:
        wl["trace"] = req.trace
    if req.input_tokens:
        wl["input"] = {"mean": req.input_tokens}
    if req.output_tokens:
        wl["output"] = {"mean": req.output_tokens}
    cfg: dict = {
        "model": req.model,
        "hardware": cand.hardware,
        "weights": cand.weights,
        "kv_cache": cand.kv_cache,
        "tp": cand.tp,
        "seed": req.seed,
        "mode": "fast",
        "workload": wl,
        "scheduler": {
            "max_num_seqs": cand.max_num_seqs,
            "max_num_batched_tokens": cand.max_num_batched_tokens,
        },
    }
    if (
        req.engine
    ):  # the preset's scheduling; the candidate's batch cap and chunk stay the searched levers
        from infercast.specs.engines import load_engine

        preset = load_engine(req.engine)
        cfg["scheduler"].update(policy=preset.policy, block_size=preset.block_size)
    for section, items in req.levers:  # the stated skew / adapters, the same for every candidate
        cfg[section] = dict(items)
    if cand.speculative:
        cfg["speculative"] = {
            "method": "eagle",
            "num_speculative_tokens": req.num_speculative_tokens,
            "acceptance": req.acceptance,
            "acceptance_std": 0.1,
        }
    if cand.disagg:
        cfg["disaggregation"] = {
            "prefill": {"replicas": cand.disagg[0]},
            "decode": {"replicas": cand.disagg[1]},
        }
    return cfg


def capacity(cand: Candidate, req: PlanRequest, timer) -> Capacity:
    """Saturated throughput of one unit: all requests at t=0, eight batch caps of them per
    replica."""
    from infercast.sim.config import build_config
    from infercast.sim.run import simulate

    n = min(20_000, max(req.num_requests, 8 * cand.max_num_seqs * cand.replicas_per_unit))
    s = simulate(
        build_config(sim_config(cand, req, 1, num_requests=n, offline=True)), timer
    ).summary
    rps = s.request_throughput_rps
    residence = s.e2e.mean - s.queueing.mean
    if not (rps > 0 and residence == residence):
        return Capacity(0.0, math.inf)
    return Capacity(rps, max(residence, 0.0))


def _point(cand: Candidate, req: PlanRequest, units: int, timer, cap: Capacity) -> Point:
    from infercast.sim.config import build_config
    from infercast.sim.run import simulate

    rate = req.rate / units
    n = cap.num_requests(rate, req.num_requests)
    cfg = build_config(sim_config(cand, req, units, num_requests=n))
    res = simulate(cfg, timer)
    s = res.summary
    jpt, watts = _energy(res, cfg, timer, units)
    ttft, tpot = s.ttft.percentiles[99.0], s.tpot.percentiles[99.0]
    tpot = 0.0 if tpot != tpot else tpot  # one-token outputs: no TPOT
    miss = max(ttft / req.slo_ttft_p99_s, tpot / req.slo_tpot_p99_s)
    util = rate / cap.requests_per_s if cap.requests_per_s > 0 else math.inf
    return Point(
        units,
        units * cand.gpus_per_unit,
        ttft,
        tpot,
        s.tpot.mean,
        s.output_throughput_tps * units,
        s.completed,
        n,
        miss if ttft == ttft else float("inf"),
        util,
        jpt,
        watts,
    )


def _energy(res, cfg, timer, units: int) -> tuple[float, float]:
    """(J per output token, fleet watts) of one unit's run (``sim.economics``); nan when not
    modelled."""
    from infercast.sim.economics import economics

    e = economics(res, cfg, timer, None)
    if e.get("energy_j") is None:
        return math.nan, math.nan
    return float(e["joules_per_output_token"] or math.nan), float(
        e["average_power_w"] or math.nan
    ) * units


def plan_profile(cand: Candidate, req: PlanRequest):
    """The efficiency profile that times ``cand``'s steps (``req.profile``, on ``cand``'s part)."""
    from infercast.cost.profiles import resolve_profile
    from infercast.specs.catalog import load_hardware

    group = None
    if req.engine:
        from infercast.specs.engines import load_engine

        group = load_engine(req.engine).profile_group
    return resolve_profile(req.profile, load_hardware(cand.hardware).key, group)


def evaluate(cand: Candidate, req: PlanRequest) -> CandidateResult:
    """The fewest units of ``cand`` meeting ``req``'s SLO (doubling, then bisection)."""
    from infercast.sim.build import step_model
    from infercast.sim.config import build_config

    max_units = req.max_gpus // cand.gpus_per_unit
    if max_units < 1:
        return CandidateResult(
            cand, None, None, error=f"one unit needs {cand.gpus_per_unit} GPUs > --max-gpus"
        )
    try:
        engine = None
        if req.engine:
            from infercast.specs.engines import load_engine

            engine = load_engine(req.engine)
        timer = step_model(
            build_config(sim_config(cand, req, 1)), profile=plan_profile(cand, req), engine=engine
        )
    except InfercastError as exc:
        return CandidateResult(cand, None, None, error=str(exc))
    cap = capacity(cand, req, timer)
    seen: dict[int, Point] = {}

    def at(u: int) -> Point:
        if u not in seen:
            seen[u] = _point(cand, req, u, timer, cap)
        return seen[u]

    lo, u = 0, 1  # lo: largest count known to fail
    while not at(u).meets:
        if u == max_units:
            return CandidateResult(cand, None, at(u), tuple(seen.values()))
        lo, u = u, min(2 * u, max_units)
    while u - lo > 1:  # at(u) meets, at(lo) fails (or lo == 0)
        mid = (lo + u) // 2
        lo, u = (lo, mid) if at(mid).meets else (mid, u)
    return CandidateResult(cand, at(u), None, tuple(sorted(seen.values(), key=lambda p: p.units)))


def evaluate_args(args: tuple[Candidate, PlanRequest]) -> CandidateResult:
    """``evaluate`` on one tuple (for executors that map a one-argument function)."""
    return evaluate(*args)
