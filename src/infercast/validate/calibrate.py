"""Fit the efficiency profile to measurements: robust least squares on log errors (scipy).

Residual of a row: ``log(predicted / measured)`` (a 2x miss weighs the same up or
down, and rates and times mix). Loss: soft-L1 with a 10 % scale, so a few wild
rows (data errors, unmodelled engine behaviour) cannot drag the fit. Parameters
are fitted in log space within physical bounds, with a weak prior pulling each
one towards its starting value so fields the data cannot see stay put.

Groups: a default profile is fitted on every row, then one profile per
``hardware family / engine family`` group with at least ``min_group_rows``
rows, starting from (and pulled towards) the default. Rows predicted only by
the simulator are left out of the fit (each objective call would need a
simulation); every closed-form row is in (concurrency rows through the
closed-form closed loop) but the disaggregated ones: they are scored, not
fitted, since their closed form solves a fixed point per call (about a
millisecond a row, so a fit would take minutes) and most of them run
attention-DP, wide-EP decode workers that the cost model times only
approximately (they would pull the shared fields towards that gap). Rows whose
stated TP cannot shard the model's heads (predicted on an assumed attention-DP
layout, ``validate/setup.py``) are scored, not fitted, like other assumed rows.
Rows infercast measured itself (sources ``infercast-...``) are never fitted.

``leave_one_source_out`` refits without each source in turn and scores that
source with the profile it did not see, so the reported error is not the fit
grading itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from infercast.cost.efficiency import FIELD_NAMES, PHYSICAL_RANGES, EfficiencyProfile
from infercast.cost.profiles import ProfileSet
from infercast.validate.cases import Case
from infercast.validate.evaluate import Evaluator
from infercast.validate.ledger import profile_matrix
from infercast.validate.setup import ASSUMED_DP_NOTE, UNSIMULATED_MTP_NOTE

# The fit moves each field only inside its physical range (EfficiencyProfile's field definitions,
# each with its reason); parameters are fitted in log space, so a range starting at 0 starts at
# a negligible positive value here (0.1 us a layer, 0.1 ms a request).
LOG_FLOOR = {"layer_overhead_s": 1e-7, "request_overhead_s": 1e-4}
BOUNDS = {f: (max(lo, LOG_FLOOR.get(f, 0.0)), hi) for f, (lo, hi, _) in PHYSICAL_RANGES.items()}
AT_BOUND_REL = 0.01  # a fitted value within 1 % of a bound "sits on" it
# Where a field's start value is off (0, below its bound) the fit starts here instead: a per-layer
# cost of 20 us is the order of a layer's ~10-15 kernel boundaries at ~1.5-2 us each.
# A serving stack's per-request TTFT overhead starts at 50 ms, the order of the published
# client-side overheads (EfficiencyProfile's docstring).
FIT_START = {"layer_overhead_s": 20e-6, "request_overhead_s": 0.05}
# Where the code's value is not what any engine of the set reaches, a fit started from the code's
# values (no ``start``) starts, and its prior centres, here instead. Prefill attention: the code's
# 0.55 is between FlashAttention-2's and -3's best; FlashAttention-2 reaches 35 % of the H100 bf16
# peak and FlashAttention-3 up to 75 % on long sequences (Shah et al. 2024, arXiv:2407.08608),
# and every group's fit sits at 0.20-0.33 (docs/calibration.md, "Priors"). The code's value is
# kept for `--profile builtin` (the seed-claims gallery's profile).
PRIOR_START = {"attn_compute_eff": 0.35}
FIT_FIELDS = (
    "gemm_compute_eff",
    "gemm_compute_eff_8bit",
    "gemm_m_half",
    "mem_bw_eff",
    "attn_bw_eff",
    "attn_compute_eff",
    "comm_bw_eff",
    "step_overhead_s",
    "layer_overhead_s",
    "request_overhead_s",
)
LOSS_SCALE = 0.1  # soft-L1 knee: residuals beyond ~10 % in log space count linearly
# Prior weight per parameter (log units) = PRIOR * sqrt(rows): a one-log-unit move must cut
# each row's log error by roughly PRIOR**2 / (4 * LOSS_SCALE) to pay for itself (soft-L1 costs
# ~2*LOSS_SCALE*|r|). The default profile is what every group without its own fit uses (a
# held-out source's groups, small engines, kernel microbenchmarks), so one source with most of
# the rows must not set it alone: it is pulled towards the code's values at 0.2, and at 0.5 for
# the fields that are a part's measured kernel ceilings (CEILING_FIELDS: the MAMF GEMM and HBM
# figures EfficiencyProfile cites); a group moves from the default at 0.2. Chosen on in-sample,
# leave-one-source-out and split-half together (docs/calibration.md, "Priors").
DEFAULT_PRIOR, CEILING_PRIOR, GROUP_PRIOR = 0.2, 0.5, 0.2
CEILING_FIELDS = ("gemm_compute_eff", "gemm_compute_eff_8bit", "mem_bw_eff")
# A group's own profile from 30 fit rows: the smallest family in the shipped set, Ada (L40S, 33
# rows, GDDR6 and PCIe-only), fitted on alternate halves of its rows predicts the other half at 4-5
# % median error against 12 % with the default profile (benchmarks/calibrate_split_half.py,
# docs/history/validation.md "Round 5").
MIN_GROUP_ROWS = 30
NOT_FITTED = ("disaggregated",)  # scenarios scored but left out of the fit (module docstring)
# Rows infercast measured itself (the H200 steps, data/README.md) are scored, never fitted: they
# stay an out-of-sample check of whatever profile a fit makes.
HELD_OUT_SOURCE_PREFIX = "infercast-"


@dataclass
class FitResult:
    """The fitted set, and what the fit saw."""

    profiles: ProfileSet
    rows: int
    median_abs_error_before_pct: float
    median_abs_error_after_pct: float
    group_rows: dict[str, int] = field(default_factory=dict)


def _median_abs_pct(pred: np.ndarray, meas: np.ndarray) -> float:
    ok = np.isfinite(pred) & (pred > 0)
    return float(np.median(np.abs(pred[ok] / meas[ok] - 1.0)) * 100) if ok.any() else math.nan


class Calibrator:
    """Fits over the closed-form rows of ``cases`` (plans built once, reused by every fit)."""

    def __init__(
        self,
        cases: Sequence[Case],
        fields: Sequence[str] = FIT_FIELDS,
        min_group_rows: int = MIN_GROUP_ROWS,
        prior_scale: float = 1.0,
    ):
        self.ev = Evaluator(cases, simulate=False)
        self.measured = np.array([c.value for c in self.ev.cases])
        self.fields = tuple(fields)
        self.min_group_rows = min_group_rows
        self.prior_scale = prior_scale  # 0: no prior (pure data fit)
        self.group_of = self.ev.group_index()

    def rows(self, exclude_source: str | None = None) -> np.ndarray:
        """Indices of fit rows (optionally without one source)."""
        idx = [
            i
            for i in self.ev.predictable
            if self.ev.cases[i].scenario not in NOT_FITTED
            and not any(
                ASSUMED_DP_NOTE in n or UNSIMULATED_MTP_NOTE in n for n in self.ev.plans[i].notes
            )  # layout assumed, or MTP not simulated: scored only
            and (exclude_source is None or self.ev.cases[i].source != exclude_source)
            and not self.ev.cases[i].source.startswith(HELD_OUT_SOURCE_PREFIX)
        ]
        return np.array(idx, dtype=np.int64)

    def _residuals(self, params: np.ndarray, rows: np.ndarray) -> np.ndarray:
        pred = self.ev.values(params, rows=rows)[rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(pred / self.measured[rows])
        return np.where(np.isfinite(r), r, 5.0)  # a failed prediction costs like a 150x miss

    def _fit(
        self,
        start: EfficiencyProfile,
        base: np.ndarray,
        groups: list[int],
        rows: np.ndarray,
        prior: float | np.ndarray,
    ) -> EfficiencyProfile:
        """Fit ``self.fields`` of the profile used by ``groups`` (other groups keep ``base``);
        ``prior``: the prior's weight, one for every field or one per field."""
        cols = [FIELD_NAMES.index(f) for f in self.fields]
        x0 = np.log(
            [
                getattr(start, f)
                if getattr(start, f) >= BOUNDS[f][0]
                else FIT_START.get(f, BOUNDS[f][0])
                for f in self.fields
            ]
        )
        lo = np.log([BOUNDS[f][0] for f in self.fields])
        hi = np.log([BOUNDS[f][1] for f in self.fields])
        x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

        def fun(x: np.ndarray) -> np.ndarray:
            p = base.copy()
            for g in groups:
                p[g, cols] = np.exp(x)
            return np.concatenate([self._residuals(p, rows), prior * (x - x0)])

        sol = least_squares(
            fun,
            x0,
            bounds=(lo, hi),
            loss="soft_l1",
            f_scale=LOSS_SCALE,
            diff_step=1e-3,
            x_scale=1.0,
            max_nfev=60 * len(x0),
        )
        return start.with_updates(
            **{f: float(v) for f, v in zip(self.fields, np.exp(sol.x), strict=True)}
        )

    def fit(
        self,
        start: ProfileSet | None = None,
        exclude_source: str | None = None,
        per_group: bool = True,
        name: str = "calibrated",
        rows: np.ndarray | None = None,
    ) -> FitResult:
        """Default profile on all fit rows (or ``rows``), then per-group profiles where the data
        supports it."""
        start = start or ProfileSet(EfficiencyProfile(**PRIOR_START))
        rows = self.rows(exclude_source) if rows is None else rows
        n_groups = len(self.ev.groups)
        before = self.ev.values(
            profile_matrix([start.for_group(g) for g in self.ev.groups]), rows=rows
        )[rows]
        base = np.tile(profile_matrix([start.default]), (n_groups, 1))
        prior = (
            self.prior_scale
            * np.array(
                [CEILING_PRIOR if f in CEILING_FIELDS else DEFAULT_PRIOR for f in self.fields]
            )
            * math.sqrt(rows.size)
        )
        default = self._fit(start.default, base, list(range(n_groups)), rows, prior).with_updates(
            name=name
        )
        base = np.tile(profile_matrix([default]), (n_groups, 1))
        groups: dict[str, EfficiencyProfile] = {}
        counts: dict[str, int] = {}
        for g, key in enumerate(self.ev.groups):
            mine = rows[self.group_of[rows] == g]
            counts[key] = int(mine.size)
            if per_group and mine.size >= self.min_group_rows:
                prof = self._fit(
                    default, base, [g], mine, self.prior_scale * GROUP_PRIOR * math.sqrt(mine.size)
                )
                groups[key] = prof.with_updates(name=f"{name}:{key}")
                base[g] = profile_matrix([prof])[0]
        after = self.ev.values(base, rows=rows)[rows]
        fitted = ProfileSet(default, groups)
        return FitResult(
            fitted,
            int(rows.size),
            _median_abs_pct(before, self.measured[rows]),
            _median_abs_pct(after, self.measured[rows]),
            counts,
        )

    def at_bounds(self, profiles: ProfileSet) -> list[str]:
        """Fitted fields that sit on a bound of their physical range (``AT_BOUND_REL``), as
        ``"<group>: <field>=<value> (lower|upper bound)"``; the default profile is ``default``."""
        out = []
        for key, prof in [("default", profiles.default), *sorted(profiles.groups.items())]:
            for f in self.fields:
                lo, hi = BOUNDS[f]
                v = getattr(prof, f)
                side = (
                    "lower"
                    if v <= lo * (1 + AT_BOUND_REL)
                    else "upper"
                    if v >= hi * (1 - AT_BOUND_REL)
                    else None
                )
                if side and (key == "default" or v != getattr(profiles.default, f)):
                    out.append(f"{key}: {f}={v:.4g} ({side} bound)")
        return out

    def split_half(self, per_group: bool = True) -> dict[str, float]:
        """Fit on alternate fit rows (even positions), score the other half, and the reverse:
        median |error| % of each held-out half and their mean, on the closed forms
        (:func:`split_half`; on the simulated path with a ``validate.simfit.SimulatedPath``)."""
        return split_half(self, None, per_group)

    def predict(self, profiles: ProfileSet, rows: np.ndarray) -> np.ndarray:
        return self.ev.values(
            profile_matrix([profiles.for_group(g) for g in self.ev.groups]), rows=rows
        )[rows]

    def leave_one_source_out(
        self, min_rows: int = 10, per_group: bool = True
    ) -> dict[str, dict[str, float]]:
        """Per source with >= ``min_rows`` fit rows: median |error| % in-sample vs held out, on
        the closed forms (:func:`leave_one_source_out`)."""
        full = self.fit(per_group=per_group).profiles
        return leave_one_source_out(self, None, full, per_group, min_rows)


# The procedure and its cross-validation, on the closed forms (``path`` None) or on the simulated
# path (``path``: a ``validate.simfit.SimulatedPath``, which refits the serving overhead there and
# scores rows as ``validate`` predicts them; that module's docstring).


def fit_profiles(
    cal: Calibrator,
    path,
    rows: np.ndarray | None = None,
    exclude_source: str | None = None,
    per_group: bool = True,
    name: str = "calibrated",
    min_rows: int | None = None,
) -> ProfileSet:
    """The whole procedure on ``rows`` (or the fit rows without ``exclude_source``): every field
    on the closed forms, then, with a ``path``, the overheads on the simulated path."""
    rows = cal.rows(exclude_source) if rows is None else rows
    prof = cal.fit(per_group=per_group, name=name, rows=rows).profiles
    if path is None or not per_group:
        return prof
    return path.refit(prof, rows, cal.min_group_rows if min_rows is None else min_rows)


def _scorer(cal: Calibrator, path):
    def score(profiles: ProfileSet, rows: np.ndarray) -> float:
        if path is None:
            return _median_abs_pct(cal.predict(profiles, rows), cal.measured[rows])
        return path.score(profiles, rows)

    return score


def _reaches(path, rows: np.ndarray, profiles: ProfileSet) -> bool:
    """Whether the overhead refit can change the score of ``rows`` (module docstring)."""
    return path is not None and bool(np.any(path.coef(rows, profiles) != 0))


def leave_one_source_out(
    cal: Calibrator,
    path,
    full: ProfileSet,
    per_group: bool = True,
    min_source_rows: int = 10,
) -> dict[str, dict[str, float]]:
    """Per source with >= ``min_source_rows`` fit rows: its rows and median |error| % in sample
    (``full``) and held out (the procedure of :func:`fit_profiles` run without it), scored on
    the simulated path with a ``path``, else on the closed forms."""
    score = _scorer(cal, path)
    every = cal.rows()
    out = {}
    for src in sorted({cal.ev.cases[i].source for i in every}):
        held = np.array([i for i in every if cal.ev.cases[i].source == src], dtype=np.int64)
        if held.size < min_source_rows:
            continue
        fold_path = path if _reaches(path, held, full) else None
        cv = fit_profiles(cal, fold_path, exclude_source=src, per_group=per_group)
        out[src] = {
            "rows": int(held.size),
            "in_sample_median_abs_error_pct": score(full, held),
            "held_out_median_abs_error_pct": score(cv, held),
        }
    return out


def split_half(cal: Calibrator, path, per_group: bool = True) -> dict[str, float]:
    """The procedure on alternate fit rows (even positions), the other half scored, and the
    reverse: each half's held-out median |error| % and their mean (``median_abs_error_pct``)."""
    score = _scorer(cal, path)
    every = cal.rows()
    halves = (every[0::2], every[1::2])
    out = {}
    for half, (fit_rows, held) in zip(("a", "b"), (halves, halves[::-1]), strict=True):
        prof = fit_profiles(
            cal,
            path if _reaches(path, held, ProfileSet()) else None,
            rows=fit_rows,
            per_group=per_group,
            min_rows=cal.min_group_rows // 2,
        )
        out[f"held_out_half_{half}_median_abs_error_pct"] = score(prof, held)
    out["median_abs_error_pct"] = float(np.mean(list(out.values())))
    return out


def cross_validate(
    cal: Calibrator,
    path,
    full: ProfileSet,
    per_group: bool = True,
    min_source_rows: int = 10,
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """(:func:`leave_one_source_out`, :func:`split_half`) of the procedure of
    :func:`fit_profiles`. A fold refits the overheads only when its held-out rows include one
    they reach (module docstring)."""
    return (
        leave_one_source_out(cal, path, full, per_group, min_source_rows),
        split_half(cal, path, per_group),
    )
