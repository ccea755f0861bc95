"""validate/simfit.py: the serving overhead refitted on the simulated path, and the scores."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.profiles import ProfileSet
from infercast.validate.calibrate import Calibrator, cross_validate
from infercast.validate.evaluate import Evaluator
from infercast.validate.simfit import GRID_STEP_S, SimulatedPath

GROUP = "hopper/vllm"
TRUTH = ProfileSet(EfficiencyProfile(), {GROUP: EfficiencyProfile(request_overhead_s=0.08)})


@pytest.fixture
def measured_rows(concurrency_row):
    """TTFT and TPOT rows of three client counts (one source), 'measured' by simulating them with
    ``TRUTH`` (an 80 ms serving overhead in their group)."""
    cases = []
    for c in (4, 8, 16):
        for metric in ("ttft_mean_s", "tpot_mean_s"):
            cases.append(
                concurrency_row(
                    id=f"c{c}-{metric}",
                    metric=metric,
                    concurrency=c,
                    output_tokens=128,
                    source="s",
                )
            )
    preds = Evaluator(cases, prefer_simulator=True, workers=1).predict(TRUTH)
    return [replace(p.case, value=p.predicted) for p in preds]


def test_the_overhead_adds_to_a_simulated_ttft_and_to_nothing_else(measured_rows):
    cal = Calibrator(measured_rows)
    path = SimulatedPath(cal, measured_rows, workers=1)
    rows = cal.rows()
    coef = path.coefficients(rows, TRUTH)
    ttft = np.array([cal.ev.cases[i].metric == "ttft_mean_s" for i in rows])
    assert coef[ttft] == pytest.approx(1.0, abs=1e-12) and not coef[~ttft].any()
    # the simulation does not read the field: the prediction is the engine part plus it
    pred = path.predict(TRUTH, rows)
    assert pred == pytest.approx(path.engine(TRUTH, rows) + 0.08 * coef, rel=1e-12)
    assert pred == pytest.approx(cal.measured[rows], rel=1e-12)


def test_refit_recovers_the_overhead_the_rows_were_measured_with(measured_rows):
    cal = Calibrator(measured_rows)
    path = SimulatedPath(cal, measured_rows, workers=1)
    start = ProfileSet(EfficiencyProfile(), {GROUP: EfficiencyProfile(request_overhead_s=0.2)})
    fitted = path.refit(start, cal.rows(), min_rows=3)
    assert fitted.groups[GROUP].request_overhead_s == pytest.approx(0.08, abs=GRID_STEP_S)
    assert path.score(fitted, cal.rows()) < 0.5 < 10 < path.score(start, cal.rows())
    # a group with fewer rows than min_rows keeps its value, as does the default profile
    assert path.refit(start, cal.rows(), min_rows=4) == start


def test_closed_form_rows_score_the_same_on_either_path():
    """Rows with no simulated predictor: the simulated path's cross-validation is the closed
    form's, fold for fold, and simulates nothing."""
    from tests.validate.test_calibrate import FIELDS, TRUE, synthetic_cases

    cases = synthetic_cases(ProfileSet(TRUE.with_updates(mem_bw_eff=0.7)))
    cal = Calibrator(cases, fields=FIELDS, prior_scale=0.0)
    full = cal.fit(per_group=False).profiles
    path = SimulatedPath(cal, cases, workers=1)
    sim = cross_validate(cal, path, full, per_group=False, min_source_rows=3)
    closed = cross_validate(cal, None, full, per_group=False, min_source_rows=3)
    assert sim == closed and set(sim[0]) == {"src0", "src1", "src2"}
    assert path.simulations == 0
