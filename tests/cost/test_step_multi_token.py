"""The CPU engine's layer-by-layer cost of a step of several tokens
(EfficiencyProfile.multi_token_step_s): charged once to every step of more than one new token, in
StepModel and in the ledger."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision
from infercast.validate.ledger import Ledger, StepModels, expand, profile_matrix, setup_step_model
from infercast.validate.setup import Setup


def test_a_step_of_several_tokens_pays_the_multi_token_cost_once():
    """1.1 ms a step of two or more tokens: a one-token decode pays nothing, a 2-token decode,
    a 512-token prefill (with the widening beside it) and the closed-form decode of 4 pay it."""
    hw, prec = load_hardware("h200-sxm"), Precision.parse("fp8", "fp8")
    off = StepModel(load_model("llama-3.1-8b"), hw, prec, profile=EfficiencyProfile())
    on = StepModel(
        load_model("llama-3.1-8b"),
        hw,
        prec,
        profile=EfficiencyProfile(multi_token_step_s=1.1e-3, widen_step_s=0.09),
    )
    for new, extra in (([1], 0.0), ([1, 1], 1.1e-3), ([512], 0.0911)):
        cached = [100] * len(new)
        assert on.step_time_s(new, cached) - off.step_time_s(new, cached) == pytest.approx(extra)
        assert on.step_cost(new, cached).time_s == pytest.approx(on.step_time_s(new, cached))
    assert on.decode_affine(1)[0] == pytest.approx(off.decode_affine(1)[0])
    assert on.decode_affine(4)[0] - off.decode_affine(4)[0] == pytest.approx(1.1e-3)
    assert on.chunk_step_time_s(3, 300.0, 16, 0) - off.chunk_step_time_s(
        3, 300.0, 16, 0
    ) == pytest.approx(1.1e-3)


def test_ledger_charges_the_multi_token_cost_as_the_step_model():
    prof = EfficiencyProfile(multi_token_step_s=1.1e-3)
    setup = Setup("llama-3.1-8b", "h100-sxm", "fp8", "fp8", 1, 1, 1, 256, 8192)
    ledger = Ledger(StepModels())
    shapes = [((1, 1, 500),), ((8, 1, 500),), ((1, 2048, 0),)]
    idx = {sh: ledger.add(0, setup, sh) for sh in shapes}
    times = ledger.times(profile_matrix([prof]))
    for sh, i in idx.items():
        assert times[i] == pytest.approx(
            setup_step_model(setup, prof).step_time_s(*expand(sh)), rel=1e-9
        )
