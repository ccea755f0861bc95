"""Per-layer step overhead (EfficiencyProfile.layer_overhead_s): charged once per step per decoder
layer, the same in StepModel and in the vectorized ledger."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision
from infercast.validate.ledger import Ledger, StepModels, expand, profile_matrix, setup_step_model
from infercast.validate.setup import Setup

SHAPES = [((64, 1, 1000),), ((8, 1, 500), (1, 2048, 0))]


def test_default_is_off_and_the_profile_is_kept():
    prof = EfficiencyProfile()
    assert prof.layer_overhead_s == 0.0
    sm = StepModel(
        load_model("llama-3.1-8b"),
        load_hardware("h100-sxm"),
        Precision.parse("fp8", "fp8"),
        profile=prof,
    )
    assert sm.profile is prof


def test_step_time_adds_layers_times_the_overhead():
    """Llama-3.1-8B has 32 decoder layers, Llama-3.1-70B 80: 40 us a layer adds 1.28 and 3.2 ms a
    step."""
    hw = load_hardware("h200-sxm")
    for name, layers in (("llama-3.1-8b", 32), ("llama-3.1-70b", 80)):
        off = StepModel(load_model(name), hw, Precision.parse("fp8", "fp8"))
        on = StepModel(
            load_model(name),
            hw,
            Precision.parse("fp8", "fp8"),
            profile=EfficiencyProfile(layer_overhead_s=40e-6),
        )
        assert on.model.num_layers == layers
        for shape in SHAPES:
            assert on.step_time_s(*expand(shape)) - off.step_time_s(
                *expand(shape)
            ) == pytest.approx(layers * 40e-6)
        assert on.step_cost(*expand(SHAPES[0])).overhead_s == pytest.approx(1e-3 + layers * 40e-6)


def test_ledger_charges_the_same():
    prof = EfficiencyProfile(layer_overhead_s=40e-6, step_overhead_s=2e-3)
    setups = [
        Setup("llama-3.1-8b", "h100-sxm", "fp8", "fp8", 1, 1, 1, 256, 8192),
        Setup("qwen3-30b-a3b", "b200", "fp4", "fp8", 2, 1, 2, 2048, 8192),
    ]
    ledger = Ledger(StepModels())
    idx = {(s, sh): ledger.add(0, s, sh) for s in setups for sh in SHAPES}
    times = ledger.times(profile_matrix([prof]))
    for (s, sh), i in idx.items():
        assert times[i] == pytest.approx(
            setup_step_model(s, prof).step_time_s(*expand(sh)), rel=1e-9
        )
