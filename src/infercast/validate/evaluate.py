"""Predict many rows at once: plans -> one vectorized ledger -> values, for any profile set.

``Evaluator(cases)`` plans every row once (the expensive part: op ledgers from
the cost model); ``predict(profiles)`` then times every shape under the
profiles in milliseconds, and runs the simulator only for simulator-based
rows (one run per distinct configuration, shared by its rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from infercast.cost.profiles import ProfileSet
from infercast.errors import InfercastError, with_flags
from infercast.specs.checkpoint import checkpoint_weights
from infercast.specs.engines import EnginePreset
from infercast.validate.cases import Case
from infercast.validate.ledger import Ledger, StepModels, profile_matrix
from infercast.validate.predict import Plan, plan_case
from infercast.validate.setup import Unpredictable, group_key, hardware_family
from infercast.validate.simstore import SimStore
from infercast.validate.speculative import with_acceptance


@dataclass(frozen=True)
class Prediction:
    """One row's outcome: a predicted value, or the reason it was not predicted."""

    case: Case
    predicted: float | None
    skipped_reason: str | None = None
    group: str = ""
    notes: tuple[str, ...] = ()
    assumed_weights: str | None = None  # the dtype assumed for a row that states none
    closed_form: float | None = None  # the closed form's value of a simulated row (the cross-check)

    @property
    def error_pct(self) -> float | None:
        """Signed % error (predicted - measured) / measured."""
        if self.predicted is None:
            return None
        return (self.predicted - self.case.value) / self.case.value * 100.0


@dataclass(frozen=True)
class SimFailure:
    """A simulation that raised instead of giving a Summary: its rows are skipped with ``reason``
    (shown in the report's skipped reasons), and the other rows are still predicted."""

    reason: str


def _run_one(item):
    """One ``(task, profile)``: the task's result, or a :class:`SimFailure` naming its error."""
    task, prof = item
    try:
        return task(prof)
    except Exception as exc:  # any failure of one row's model: that row is skipped, not the run
        return SimFailure(f"simulation failed: {type(exc).__name__}: {exc}")


def run_simulations(todo: dict, workers: int | None = None) -> dict:
    """``{key: (task, profile)}`` -> ``{key: task(profile)}``, in a process pool when there is more
    than one task and more than one worker (``workers``: None = one per CPU). Each task is one
    independent simulation (``validate.simrun.SimTask``, picklable) with its own fixed seed, so the
    results do not depend on the worker count or the order the pool runs them in. A task that
    raises gives a :class:`SimFailure` in its place."""
    import multiprocessing
    import os

    keys = [
        k for k, (task, _) in todo.items() if hasattr(task, "config")
    ]  # SimTasks pickle; closures do not
    out = {k: _run_one(todo[k]) for k in todo if not hasattr(todo[k][0], "config")}
    n = min(len(keys), workers or os.cpu_count() or 1)
    # a daemonic process (the ui's validation run) may not start a pool: run the tasks in it
    if n <= 1 or multiprocessing.current_process().daemon:
        return out | {k: _run_one(todo[k]) for k in keys}
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # the longest runs first (more requests): the pool's last task is then a short one
    keys.sort(key=lambda k: -_task_size(todo[k][0]))
    with ProcessPoolExecutor(max_workers=n) as pool:
        futures = [(k, pool.submit(_run_one, todo[k])) for k in keys]
        for k, future in futures:
            try:
                out[k] = future.result()
            except BrokenProcessPool:  # a worker died (killed, out of memory): the pool ends
                out[k] = SimFailure(
                    "simulation failed: a worker process ended abruptly (killed or out of "
                    "memory) before this simulation finished"
                )
    return out


def _task_size(task) -> float:
    cfg = getattr(task, "config", None)
    if cfg is None:
        return 0.0
    w = cfg.workload
    return float(w.num_requests) * float(w.output.mean or 1)


class Evaluator:
    """Plans for a list of cases, reusable across profile sets (calibration calls it often)."""

    def __init__(
        self,
        cases: Sequence[Case],
        simulate: bool = True,
        prefer_simulator: bool = False,
        assume_weights: str | None = None,
        engine: EnginePreset | None = None,
        workers: int | None = None,
        store: SimStore | None = None,
    ):
        """``simulate=False`` skips rows only the simulator predicts; ``prefer_simulator`` (what
        ``infercast validate`` does unless ``--fast``) uses the simulator also where a closed form
        exists (concurrency and disaggregated rows, each with its row's benchmark client; the
        closed form's value is kept as ``Prediction.closed_form``; calibration leaves it off: its
        objective is called thousands of times); ``assume_weights`` fills a missing weight dtype
        instead of skipping the row: ``"checkpoint"`` = the checkpoint's own
        (``specs.checkpoint.checkpoint_weights``), else that dtype. Each such row carries
        ``assumed_weights``; its original case is kept for reporting. ``engine``: one engine preset
        for every row (``validate --engine``), its limits, memory rule and profile group; None =
        each row's own (``setup.row_preset``). ``workers``: processes that run the simulations
        (:func:`run_simulations`; None = one per CPU). ``store``: simulated results kept across
        runs (:mod:`infercast.validate.simstore`; None = none kept)."""
        self.workers = workers
        self.store = store
        # row -> closed-form value, for simulated rows (last values())
        self.closed_form: dict[int, float] = {}
        self.sim_failures: dict[int, str] = {}  # row -> why its simulation failed (last values())
        self.cases = with_acceptance(cases)
        self.assumed: dict[int, str] = {}
        if assume_weights:
            for i, c in enumerate(self.cases):
                if c.model and not c.weights and not c.problem and c.scenario != "speculative":
                    w = (
                        checkpoint_weights(c.model)
                        if assume_weights == "checkpoint"
                        else assume_weights
                    )
                    if w:
                        self.cases[i] = replace(c, weights=w)
                        self.assumed[i] = w
        self.models = StepModels(engine)
        self.engine = engine
        self.ledger = Ledger(self.models)
        self.plans: list[Plan | None] = []
        self.reasons: list[str | None] = []
        self.groups: list[str] = []
        self._shape_idx: list[tuple[int, ...]] = []
        self._row_shapes: dict[bytes, np.ndarray] = {}
        for case in self.cases:
            plan, reason, idx = self._plan(case, simulate, prefer_simulator)
            self.plans.append(plan)
            self.reasons.append(reason)
            self._shape_idx.append(idx)

    def _group(self, key: str) -> int:
        if key not in self.groups:
            self.groups.append(key)
        return self.groups.index(key)

    def _plan(
        self, case: Case, simulate: bool, prefer: bool
    ) -> tuple[Plan | None, str | None, tuple[int, ...]]:
        try:
            plan = plan_case(case, self.models)
            if not simulate and plan.combine is None:
                raise Unpredictable(
                    "only the simulator predicts this row (simulation off in this run)"
                )
            if not simulate or (plan.combine is not None and not prefer):
                plan = replace(plan, simulate=None)
            if self.engine is not None:
                plan = replace(
                    plan, group=f"{hardware_family(case.hardware)}/{self.engine.profile_group}"
                )
            g = self._group(plan.group)
            setups = plan.setups or (plan.layout.setup if plan.layout else None,) * len(plan.shapes)
            idx = tuple(
                self.ledger.add(g, su, s) for su, s in zip(setups, plan.shapes, strict=True)
            )
        except Unpredictable as exc:
            return None, with_flags(str(exc), {}), ()
        except (
            InfercastError,
            ValueError,
            ZeroDivisionError,
        ) as exc:  # a model gap, reported per row
            return None, f"cost model cannot handle this setup: {with_flags(str(exc), {})}", ()
        return plan, None, idx

    def _stored(self, task, profile):
        """The store's result of a SimTask (closures are not stored: their repr is an address)."""
        if self.store is None or not hasattr(task, "config"):
            return None
        return self.store.get(task, profile)

    @property
    def predictable(self) -> list[int]:
        """Indices of rows with a plan."""
        return [i for i, p in enumerate(self.plans) if p is not None]

    def group_index(self) -> np.ndarray:
        """Profile-group index of each planned row (-1 for skipped rows)."""
        return np.array([self.groups.index(p.group) if p else -1 for p in self.plans])

    def _shapes_of(self, rows: Sequence[int]) -> np.ndarray:
        """The ledger's shape indices that ``rows`` read (cached: a fit asks for one set of rows
        thousands of times)."""
        rows = np.asarray(rows, dtype=np.int64)
        key = rows.tobytes()
        hit = self._row_shapes.get(key)
        if hit is None:
            hit = np.unique(
                np.fromiter((j for i in rows for j in self._shape_idx[i]), dtype=np.int64, count=-1)
            )
            self._row_shapes[key] = hit
        return hit

    def values(
        self,
        params: np.ndarray,
        profiles=None,
        rows: Sequence[int] | None = None,
        sim_cache: dict | None = None,
    ) -> np.ndarray:
        """Predicted value per row (NaN when skipped) with ``params`` = [groups, fields]."""
        from infercast.cost.efficiency import FIELD_NAMES, EfficiencyProfile

        times = self.ledger.times(params, None if rows is None else self._shapes_of(rows))
        if profiles is None:
            profiles = [
                EfficiencyProfile(**dict(zip(FIELD_NAMES, map(float, row), strict=True)))
                for row in params
            ]
        out = np.full(len(self.cases), np.nan)
        cache = {} if sim_cache is None else sim_cache
        picked = range(len(self.cases)) if rows is None else rows
        todo = {}
        for i in picked:
            plan = self.plans[i]
            if plan is not None and plan.simulate is not None:
                prof = profiles[self.groups.index(plan.group)]
                key = (plan.sim_key, prof)
                if key in cache or key in todo:
                    continue
                stored = self._stored(plan.simulate, prof)
                if stored is not None:
                    cache[key] = stored
                else:
                    todo[key] = (plan.simulate, prof)
        done = run_simulations(todo, self.workers)
        if self.store is not None:
            for key, result in done.items():
                task = todo[key][0]
                if hasattr(task, "config") and not isinstance(result, SimFailure):
                    self.store.put(task, key[1], result)
        cache.update(done)
        for i in picked:
            plan = self.plans[i]
            if plan is None:
                continue
            prof = profiles[self.groups.index(plan.group)]
            if plan.simulate is not None:
                key = (plan.sim_key, prof)
                if key not in cache:
                    cache[key] = _run_one((plan.simulate, prof))
                result = cache[key]
                if isinstance(result, SimFailure):
                    self.sim_failures[i] = result.reason
                    continue
                self.sim_failures.pop(i, None)
                out[i] = plan.sim_combine(result, prof)
                if (
                    plan.combine is not None and plan.shapes
                ):  # the closed form beside it (cross-check)
                    self.closed_form[i] = plan.combine([times[j] for j in self._shape_idx[i]], prof)
            else:
                out[i] = plan.combine([times[j] for j in self._shape_idx[i]], prof)
        return out

    def predict(self, profiles: ProfileSet, sim_cache: dict | None = None) -> list[Prediction]:
        """Every row's Prediction under a profile set (``sim_cache``: as in :meth:`values`)."""
        profs = [profiles.for_group(g) for g in self.groups]
        values = self.values(
            profile_matrix(profs or [profiles.default]), profs, sim_cache=sim_cache
        )
        out = []
        for i, (case, plan, reason, v) in enumerate(
            zip(self.cases, self.plans, self.reasons, values, strict=True)
        ):
            assumed = self.assumed.get(i)
            if plan is not None and assumed:
                plan = replace(plan, notes=plan.notes + (f"weights not stated: {assumed} assumed",))
            if plan is None:
                out.append(Prediction(case, None, reason, group_key(case), (), assumed))
            elif i in self.sim_failures:
                out.append(
                    Prediction(case, None, self.sim_failures[i], plan.group, plan.notes, assumed)
                )
            elif not math.isfinite(v) or v <= 0:
                out.append(
                    Prediction(
                        case,
                        None,
                        f"the model gave no finite positive value ({v})",
                        plan.group,
                        plan.notes,
                        assumed,
                    )
                )
            else:
                cf = self.closed_form.get(i)
                out.append(
                    Prediction(
                        case,
                        float(v),
                        None,
                        plan.group,
                        plan.notes,
                        assumed,
                        None if cf is None or not math.isfinite(cf) else float(cf),
                    )
                )
        return out
