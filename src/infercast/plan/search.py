"""The search: evaluate candidates (cached), rank those meeting the SLO by cost, explain the rest.

Default search is in two stages (coordinate descent): stage 1 evaluates every
part x TP x precision at the base scheduler (256 sequences, 8192-token chunks),
aggregated, without speculation; stage 2 tries the scheduler, speculative and
disaggregation levers around the ``top_k`` stage-1 leaders. ``exhaustive``
evaluates the full product instead. Each candidate's evaluation is a pure
function of (candidate, request), run on the chosen executor and cached in
memory (and on disk with ``cache_dir``), so repeated and distributed runs give
the same plan.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from infercast.cost.dollars import dollars_per_million_tokens
from infercast.errors import ConfigError
from infercast.plan.evaluate import CandidateResult, Point, evaluate_args
from infercast.plan.executors import run_map
from infercast.plan.space import Candidate, PlanRequest, exhaustive, levers, stage_one


@dataclass(frozen=True)
class Option:
    """A candidate at a unit count, priced."""

    candidate: Candidate
    point: Point
    price_per_gpu_hour: float

    @property
    def cost_per_hour(self) -> float:
        return self.point.num_gpus * self.price_per_gpu_hour

    @property
    def cost_per_million_output_tokens(self) -> float:
        return dollars_per_million_tokens(
            self.price_per_gpu_hour, self.point.num_gpus, self.point.output_tokens_per_s
        )

    def to_dict(self, req: PlanRequest) -> dict:
        c, p = self.candidate, self.point
        return {
            "hardware": c.hardware,
            "num_gpus": p.num_gpus,
            "tp": c.tp,
            "replicas": p.units * c.replicas_per_unit,
            "weights": c.weights,
            "kv_cache": c.kv_cache,
            "scheduler": {
                "policy": "chunked",
                "max_num_seqs": c.max_num_seqs,
                "max_num_batched_tokens": c.max_num_batched_tokens,
            },
            "speculative": c.speculative,
            "speculative_config": {
                "method": "eagle",
                "num_speculative_tokens": req.num_speculative_tokens,
                "acceptance": req.acceptance,
            }
            if c.speculative
            else None,
            "disaggregated": c.disagg is not None,
            "pools": {
                "prefill_replicas": p.units * c.disagg[0],
                "decode_replicas": p.units * c.disagg[1],
                "ratio": f"{c.disagg[0]}:{c.disagg[1]}",
            }
            if c.disagg
            else None,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "cost_per_hour": self.cost_per_hour,
            "cost_per_million_output_tokens": self.cost_per_million_output_tokens,
            "ttft_p99_s": p.ttft_p99_s,
            "tpot_p99_s": p.tpot_p99_s,
            "meets_slo": p.meets,
            "utilization": p.utilization,
            "num_requests_simulated": p.num_requests,
            "output_tokens_per_s": p.output_tokens_per_s,
            "joules_per_output_token": _finite(p.joules_per_output_token),
            "average_power_w": _finite(p.power_w),
            "kwh_per_day": _finite(p.power_w * 86400 / 3.6e6),
            "throughput_per_gpu": p.output_tokens_per_s / p.num_gpus,
            "tokens_per_s_per_user": 1.0 / p.tpot_mean_s if p.tpot_mean_s > 0 else None,
            "label": c.label(),
        }


@dataclass
class Plan:
    """The answer: options meeting the SLO (cheapest first) and the misses (closest first)."""

    request: PlanRequest
    results: dict[Candidate, CandidateResult]
    ranked: list[Option]
    misses: list[Option]
    executor: str
    wall_s: float
    num_alternatives: int = 5
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def best(self) -> Option | None:
        return self.ranked[0] if self.ranked else None

    def to_dict(self) -> dict:
        req = self.request
        best = self.best
        out: dict = {
            "model": req.model,
            "rate_per_s": req.rate,
            "objective": req.objective,
            "slo": {"ttft_p99_s": req.slo_ttft_p99_s, "tpot_p99_s": req.slo_tpot_p99_s},
            "best": best.to_dict(req) if best else None,
        }
        if best is not None:
            alts = self.ranked[1 : 1 + self.num_alternatives]
            out["alternatives"] = [
                {**o.to_dict(req), "why_not": why_not(o, best, req.objective)} for o in alts
            ]
        else:
            out["closest_miss"] = (
                {**self.misses[0].to_dict(req), "why_not": miss_reason(self.misses[0], req)}
                if self.misses
                else None
            )
            out["alternatives"] = [
                {**o.to_dict(req), "why_not": miss_reason(o, req)}
                for o in self.misses[1 : 1 + self.num_alternatives]
            ]
        out.update(
            num_candidates=len(self.results),
            num_feasible=len(self.ranked),
            num_simulations=sum(len(r.points) for r in self.results.values()),
            executor=self.executor,
            wall_s=self.wall_s,
            errors=self.errors,
        )
        return out


def _finite(x: float) -> float | None:
    return x if x == x and x not in (float("inf"), float("-inf")) else None


def _energy_key(o: Option) -> float:
    """J per output token, unknown (nan) last."""
    j = o.point.joules_per_output_token
    return j if j == j else float("inf")


def why_not(o: Option, best: Option, objective: str = "cost") -> str:
    """Why an option meeting the SLO lost to the best one."""
    d_j = _energy_key(o) - _energy_key(best)
    if objective == "energy" and d_j > 1e-9:
        return (
            f"{d_j:.3f} J per output token more ({_energy_key(o):.3f} vs {_energy_key(best):.3f}) "
            f"on {o.point.num_gpus} x {o.candidate.hardware}"
        )
    d_hour = o.cost_per_hour - best.cost_per_hour
    if d_hour > 1e-9:
        return (
            f"${d_hour:.2f}/h more: {o.point.num_gpus} x {o.candidate.hardware} vs "
            f"{best.point.num_gpus} x {best.candidate.hardware}"
        )
    if o.point.miss > best.point.miss + 1e-6:
        return (
            f"same $/h, less SLO headroom: worst p99 at {o.point.miss:.0%} of its limit "
            f"vs {best.point.miss:.0%}"
        )
    if o.candidate.speculative and not best.candidate.speculative:
        return "same $/h and headroom: adds speculative decoding (a more complex setup)"
    if o.candidate.disagg is not None and best.candidate.disagg is None:
        return "same $/h and headroom: disaggregated (a more complex setup)"
    diff = [
        f"{name} {getattr(o.candidate, name)} vs {getattr(best.candidate, name)}"
        for name in ("tp", "weights", "kv_cache", "max_num_seqs", "max_num_batched_tokens")
        if getattr(o.candidate, name) != getattr(best.candidate, name)
    ]
    return "same $/h and headroom: a tie" + (f" ({', '.join(diff)})" if diff else "")


def miss_reason(o: Option, req: PlanRequest) -> str:
    p = o.point
    served = (
        ""
        if p.completed == p.num_requests
        else f", {p.num_requests - p.completed} requests rejected"
    )
    if not p.stable:
        return (
            f"cannot sustain the rate even with {p.num_gpus} GPUs: offered load is "
            f"{p.utilization:.0%} of the saturated capacity (the queue grows without bound){served}"
        )
    return (
        f"misses the SLO even with {p.num_gpus} GPUs: TTFT p99 {p.ttft_p99_s:.3f} s (SLO "
        f"{req.slo_ttft_p99_s} s), TPOT p99 {p.tpot_p99_s * 1e3:.1f} ms (SLO "
        f"{req.slo_tpot_p99_s * 1e3:.0f} ms){served}"
    )


def _price(req: PlanRequest, hardware: str, cache: dict[str, float]) -> float:
    if hardware not in cache:
        given = dict(req.prices)
        if hardware in given:
            cache[hardware] = given[hardware]
        else:
            from infercast.specs.catalog import load_hardware

            price = load_hardware(hardware).price_per_hour
            if price is None:
                raise ConfigError(
                    f"no price for {hardware!r}: pass --price {hardware}=DOLLARS_PER_GPU_HOUR"
                )
            cache[hardware] = price
    return cache[hardware]


def preflight(req: PlanRequest, executor: str, prices: dict[str, float]) -> None:
    """Check every input before the search starts (and before Ray does): the executor, the model,
    each part and its price, the trace. Each failure is the one-line error the search would raise
    later."""
    from infercast.plan.executors import check_executor
    from infercast.specs.catalog import load_hardware, load_model

    check_executor(executor)
    load_model(req.model)
    for part in req.hardware:
        load_hardware(part)
        _price(req, part, prices)
    if req.trace is not None:
        from infercast.sim.workload import load_trace

        load_trace(req.trace)


class _Evaluator:
    """Runs candidates not yet known on the executor; memory + optional disk cache."""

    def __init__(self, req: PlanRequest, executor: str, workers: int | None, cache_dir: str | None):
        self.req, self.executor, self.workers = req, executor, workers
        self.dir = Path(cache_dir) if cache_dir else None
        self.results: dict[Candidate, CandidateResult] = {}

    def _path(self, c: Candidate) -> Path:
        key = json.dumps([asdict(c), self.req.workload_key()], sort_keys=True, default=str)
        return self.dir / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.pkl"  # type: ignore[operator]

    def run(self, cands: list[Candidate]) -> None:
        todo = [c for c in dict.fromkeys(cands) if c not in self.results]
        if self.dir is not None:
            for c in list(todo):
                p = self._path(c)
                if p.is_file():
                    self.results[c] = pickle.loads(p.read_bytes())
                    todo.remove(c)
        done = run_map(evaluate_args, [(c, self.req) for c in todo], self.executor, self.workers)
        for c, r in zip(todo, done, strict=True):
            self.results[c] = r
            if self.dir is not None:
                self.dir.mkdir(parents=True, exist_ok=True)
                self._path(c).write_bytes(pickle.dumps(r))


def _rank(req: PlanRequest, results, prices) -> tuple[list[Option], list[Option]]:
    ranked = [
        Option(r.candidate, r.best, _price(req, r.candidate.hardware, prices))
        for r in results
        if r.best is not None
    ]
    # Equal $/h serves the same tokens at the same rate: prefer SLO headroom, then the simpler
    # setup.
    ranked.sort(
        key=lambda o: (
            round(o.cost_per_hour, 9),
            round(o.point.miss, 6),
            o.candidate.speculative,
            o.candidate.disagg is not None,
            o.candidate,
        )
    )
    if req.objective == "energy":  # stable: equal energy keeps the cost order
        ranked.sort(key=lambda o: round(_energy_key(o), 9))
    misses = [
        Option(r.candidate, r.closest, _price(req, r.candidate.hardware, prices))
        for r in results
        if r.best is None and r.closest is not None
    ]
    misses.sort(
        key=lambda o: (
            not o.point.stable,
            o.point.completed < o.point.num_requests,
            o.point.miss,
            o.cost_per_hour,
            o.candidate,
        )
    )
    return ranked, misses


def plan(
    req: PlanRequest,
    executor: str = "local",
    workers: int | None = None,
    cache_dir: str | None = None,
    num_alternatives: int = 5,
) -> Plan:
    """Search ``req``'s configuration space (see module doc) and rank the outcome."""
    t0 = time.perf_counter()
    prices: dict[str, float] = {}
    preflight(req, executor, prices)
    ev = _Evaluator(req, executor, workers, cache_dir)
    if req.exhaustive:
        ev.run(exhaustive(req))
    else:
        ev.run(stage_one(req))
        ranked, misses = _rank(req, ev.results.values(), prices)
        leaders = list(dict.fromkeys(o.candidate for o in ranked + misses))[: req.top_k]
        ev.run([c for base in leaders for c in levers(req, base)])
    ranked, misses = _rank(req, ev.results.values(), prices)
    errors = {r.candidate.label(): r.error for r in ev.results.values() if r.error}
    return Plan(
        req,
        ev.results,
        ranked,
        misses,
        executor,
        time.perf_counter() - t0,
        num_alternatives,
        errors,
    )
