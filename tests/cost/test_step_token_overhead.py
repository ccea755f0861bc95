"""Per-token serving overhead (EfficiencyProfile.token_overhead_s): charged once per sampling row
of a step, the same in every StepModel path and in the vectorized ledger."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision
from infercast.validate.ledger import Ledger, StepModels, expand, profile_matrix, setup_step_model
from infercast.validate.setup import Setup

SHAPES = [((64, 1, 1000),), ((8, 1, 500), (1, 2048, 0))]  # 64 decodes; 8 decodes + a prefill


def _pair(token_s: float) -> tuple[StepModel, StepModel]:
    hw, prec = load_hardware("h200-sxm"), Precision.parse("fp8", "fp8")
    off = StepModel(load_model("llama-3.1-8b"), hw, prec)
    on = StepModel(
        load_model("llama-3.1-8b"), hw, prec, profile=EfficiencyProfile(token_overhead_s=token_s)
    )
    return off, on


def test_default_is_off():
    assert EfficiencyProfile().token_overhead_s == 0.0


def test_every_step_path_adds_the_overhead_per_sampling_row():
    """64 rows at 50 us: 3.2 ms; 9 rows: 0.45 ms, in step_time_s, step_cost, the scalar paths
    the simulator takes and the closed-form decode."""
    off, on = _pair(50e-6)
    for shape, rows in zip(SHAPES, (64, 9), strict=True):
        new, cached = expand(shape)
        assert on.step_time_s(new, cached) - off.step_time_s(new, cached) == pytest.approx(
            rows * 50e-6
        )
        assert on.step_cost(new, cached).time_s == pytest.approx(on.step_time_s(new, cached))
    assert on.mixed_step_time_s(8, 8000.0, [2048], [0]) - off.mixed_step_time_s(
        8, 8000.0, [2048], [0]
    ) == pytest.approx(9 * 50e-6)
    assert on.chunk_step_time_s(8, 8000.0, 512, 100) - off.chunk_step_time_s(
        8, 8000.0, 512, 100
    ) == pytest.approx(9 * 50e-6)
    a_on, b_on = on.decode_affine(16)
    a_off, b_off = off.decode_affine(16)
    assert a_on - a_off == pytest.approx(16 * 50e-6) and b_on == pytest.approx(b_off)


def test_ledger_charges_the_same():
    prof = EfficiencyProfile(token_overhead_s=50e-6, step_overhead_s=2e-3)
    setup = Setup("llama-3.1-8b", "h100-sxm", "fp8", "fp8", 1, 1, 1, 256, 8192)
    ledger = Ledger(StepModels())
    idx = {sh: ledger.add(0, setup, sh) for sh in SHAPES}
    times = ledger.times(profile_matrix([prof]))
    for sh, i in idx.items():
        assert times[i] == pytest.approx(
            setup_step_model(setup, prof).step_time_s(*expand(sh)), rel=1e-9
        )
