"""Calibration on the simulated path: the serving overhead refitted, and the fit's scores, where
``infercast validate`` predicts by default (concurrency rows by simulation, ``validate/simrun.py``).

``infercast calibrate`` fits every efficiency field on the closed forms
(:class:`~infercast.validate.calibrate.Calibrator`: an objective call re-times every row in
milliseconds; a simulation per call would take hours). Of the fitted fields, only
``request_overhead_s`` is then refitted here, per profile group, on the simulated path: the
serving stack's latency that a benchmark client's TTFT includes (``EfficiencyProfile``), which
the closed form and the simulator need at different values because they time the engine's part
differently (the simulator's clients desynchronise, the closed form's waves do not).

Why this is cheap: the overhead is added after a simulation (``validate.predict``'s
``sim_combine``: ``StepModel`` ignores it), so a row's prediction is its engine part, simulated
once per profile with the overhead at zero, plus ``coef * request_overhead_s`` (``coef`` is 1 for
a benchmark client's TTFT, 0 for every other metric; :meth:`SimulatedPath.coefficients` measures
it from the predictor itself). One simulation set then serves every candidate value of the
refit; ``tests/validate/test_simfit.py`` checks the additivity on a simulated row.

The scores: in sample (the fitted set on its own fit rows), leave-one-source-out (the whole
procedure, closed-form fit and simulated refit, run without a source; that source's rows scored
with the result) and split-half (fit on alternate fit rows, score the others, both ways), every
row predicted as ``validate`` predicts it (``validate.calibrate.cross_validate`` with a
:class:`SimulatedPath`). A fold whose held-out rows include no row the overhead
reaches skips the refit (it cannot change their score) and simulates only its held-out rows, so
only folds holding out a source of simulated rows cost simulations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.cost.efficiency import PHYSICAL_RANGES, EfficiencyProfile
from infercast.cost.profiles import ProfileSet
from infercast.validate.calibrate import Calibrator, _median_abs_pct
from infercast.validate.evaluate import Evaluator
from infercast.validate.ledger import profile_matrix
from infercast.validate.simstore import SimStore

SIM_FIELD = "request_overhead_s"  # the one field refitted on the simulated path (docstring)
# Candidates of the refit: every 0.5 ms inside the field's physical range (an overhead of tens to
# hundreds of ms; a finer grid moves no median by a visible amount).
GRID_STEP_S = 5e-4


def _zero(p: EfficiencyProfile) -> EfficiencyProfile:
    return p.with_updates(**{SIM_FIELD: 0.0})


class SimulatedPath:
    """The fit rows of ``cal`` predicted as ``infercast validate`` predicts them by default, under
    any profile set; simulated engine parts are cached per (simulation, profile) for the run."""

    def __init__(
        self,
        cal: Calibrator,
        cases: Sequence,
        workers: int | None = None,
        store: SimStore | None = None,
    ):
        """``cases``: the cases ``cal`` was built from (same order)."""
        self.cal = cal
        self.ev = Evaluator(cases, prefer_simulator=True, workers=workers, store=store)
        if len(self.ev.cases) != len(cal.ev.cases):
            raise ValueError("`cases` must be the cases the calibrator was built from")
        self.cache: dict = {}
        self.simulations = 0  # simulated engine parts computed (cache misses), for the report
        self._coef: np.ndarray | None = None

    def _group(self, i: int) -> str:
        return self.ev.plans[i].group

    def _zeroed(self, profiles: ProfileSet) -> list[EfficiencyProfile]:
        return [_zero(profiles.for_group(g)) for g in self.ev.groups]

    def engine(self, profiles: ProfileSet, rows: np.ndarray) -> np.ndarray:
        """Each row's prediction with ``request_overhead_s`` at zero (NaN: not predicted)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not rows.size:
            return np.zeros(0)
        profs = self._zeroed(profiles)
        before = len(self.cache)
        out = self.ev.values(profile_matrix(profs), profs, rows=rows, sim_cache=self.cache)
        self.simulations += len(self.cache) - before
        return out[rows]

    def coefficients(self, rows: np.ndarray, profiles: ProfileSet) -> np.ndarray:
        """d(prediction) / d(``request_overhead_s``) of each row (0 or 1 today), measured: the
        rows are predicted with the overhead at 0 and at 1 s, the second reusing the first's
        simulated results (the simulation does not read the field: module docstring)."""
        rows = np.asarray(rows, dtype=np.int64)
        zero = self.engine(profiles, rows)
        profs0 = self._zeroed(profiles)
        ones = [p.with_updates(**{SIM_FIELD: 1.0}) for p in profs0]
        swap = dict(zip(profs0, ones, strict=True))
        cache = {(k, swap[p]): v for (k, p), v in self.cache.items() if p in swap}
        one = self.ev.values(profile_matrix(ones), ones, rows=rows, sim_cache=cache)[rows]
        return np.where(np.isfinite(one) & np.isfinite(zero), one - zero, 0.0)

    def coef(self, rows: np.ndarray, profiles: ProfileSet) -> np.ndarray:
        """:meth:`coefficients` of ``rows``, measured once for every fit row (under
        ``profiles`` the first time) and reused: the coefficient is the predictor's structure."""
        if self._coef is None:
            every = self.cal.rows()
            self._coef = np.zeros(len(self.ev.cases))
            self._coef[every] = self.coefficients(every, profiles)
        return self._coef[np.asarray(rows, dtype=np.int64)]

    def predict(self, profiles: ProfileSet, rows: np.ndarray) -> np.ndarray:
        """Each row's prediction under ``profiles`` on the simulated path."""
        rows = np.asarray(rows, dtype=np.int64)
        over = np.array([getattr(profiles.for_group(self._group(i)), SIM_FIELD) for i in rows])
        return self.engine(profiles, rows) + self.coef(rows, profiles) * over

    def refit(self, profiles: ProfileSet, rows: np.ndarray, min_rows: int) -> ProfileSet:
        """``profiles`` with each group's ``request_overhead_s`` refitted alone on ``rows``: the
        value on a :data:`GRID_STEP_S` grid inside its physical range that minimises the median
        absolute % error of the group's rows the overhead reaches (a group with fewer than
        ``min_rows`` of them, and the default profile, keep theirs)."""
        rows = np.asarray(rows, dtype=np.int64)
        reach = rows[self.coef(rows, profiles) != 0]
        if not reach.size:
            return profiles
        eng = self.engine(profiles, reach)
        meas = self.cal.measured[reach]
        ok = np.isfinite(eng) & (eng > 0)
        low, high, _ = PHYSICAL_RANGES[SIM_FIELD]
        grid = np.arange(low, high + 1e-12, GRID_STEP_S)
        groups = dict(profiles.groups)
        for key, prof in profiles.groups.items():
            mine = ok & np.array([self._group(i) == key for i in reach])
            if mine.sum() < min_rows:
                continue
            c = self.coef(reach[mine], profiles)
            e, m = eng[mine], meas[mine]
            errs = np.median(np.abs((e[None, :] + grid[:, None] * c) / m - 1.0), axis=1)
            groups[key] = prof.with_updates(**{SIM_FIELD: float(grid[int(np.argmin(errs))])})
        return ProfileSet(profiles.default, groups, profiles.fit)

    def score(self, profiles: ProfileSet, rows: np.ndarray) -> float:
        """Median absolute % error of ``rows`` under ``profiles`` on the simulated path."""
        rows = np.asarray(rows, dtype=np.int64)
        return _median_abs_pct(self.predict(profiles, rows), self.cal.measured[rows])
