"""Rows predicted on an assumption are summarized apart, and 'nothing assumed' is the rest."""

from __future__ import annotations

from infercast.cost.profiles import load_profile_set
from infercast.validate.cases import load_cases
from infercast.validate.evaluate import Evaluator
from infercast.validate.score import assumed_layout, report

# AIC-2074: an InferenceX-style disaggregated run without worker counts; AIC-0253: aiconfigurator's
# own CI run with its workers stated.
IDS = {"AIC-2074-ttft", "AIC-2074-tpot", "AIC-0253-ttft", "AIC-0253-tpot"}


def test_assumed_layout_rows_are_a_set_of_their_own():
    preds = Evaluator([c for c in load_cases() if c.id in IDS], simulate=False).predict(
        load_profile_set(None)
    )
    flagged = {p.case.id for p in preds if assumed_layout(p)}
    assert flagged == {"AIC-2074-ttft", "AIC-2074-tpot"}
    s = report(preds, "shipped")["summary"]
    assert s["assumed_layout"]["count"] == 2 and s["assumed_layout"]["predicted"] == 2
    assert s["nothing_assumed"]["count"] == 2
    assert s["overall"]["count"] == s["assumed_layout"]["count"] + s["nothing_assumed"]["count"]
