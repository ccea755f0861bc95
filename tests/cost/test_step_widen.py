"""The CPU engine's per-step widening (EfficiencyProfile.widen_step_s, widen_min_tokens): charged
once to every step of more than ``widen_min_tokens`` tokens, in StepModel and in the ledger."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision
from infercast.validate.ledger import Ledger, StepModels, expand, profile_matrix, setup_step_model
from infercast.validate.setup import Setup


def test_widening_is_charged_once_to_every_step_above_its_token_count():
    """widen_step_s 90 ms beyond 48 tokens: a 49-token step pays it, a 48-token one not; the
    closed-form decode pays it for 64 sequences, not for 16."""
    hw, prec = load_hardware("h200-sxm"), Precision.parse("fp8", "fp8")
    off = StepModel(load_model("llama-3.1-8b"), hw, prec)
    on = StepModel(
        load_model("llama-3.1-8b"), hw, prec, profile=EfficiencyProfile(widen_step_s=0.09)
    )
    for t, extra in ((48, 0.0), (49, 0.09), (512, 0.09)):
        assert on.step_time_s([t], [0]) - off.step_time_s([t], [0]) == pytest.approx(extra)
        assert on.step_cost([t], [0]).time_s == pytest.approx(on.step_time_s([t], [0]))
    assert on.chunk_step_time_s(8, 800.0, 128, 0) - off.chunk_step_time_s(
        8, 800.0, 128, 0
    ) == pytest.approx(0.09)
    assert on.decode_affine(64)[0] - off.decode_affine(64)[0] == pytest.approx(0.09)
    assert on.decode_affine(16)[0] == pytest.approx(off.decode_affine(16)[0])


def test_ledger_charges_the_widening_as_the_step_model():
    prof = EfficiencyProfile(widen_step_s=0.09, widen_min_tokens=48.0)
    setup = Setup("llama-3.1-8b", "h100-sxm", "fp8", "fp8", 1, 1, 1, 256, 8192)
    ledger = Ledger(StepModels())
    shapes = [((8, 1, 500),), ((64, 1, 1000),), ((1, 2048, 0),)]
    idx = {sh: ledger.add(0, setup, sh) for sh in shapes}
    times = ledger.times(profile_matrix([prof]))
    for sh, i in idx.items():
        assert times[i] == pytest.approx(
            setup_step_model(setup, prof).step_time_s(*expand(sh)), rel=1e-9
        )
