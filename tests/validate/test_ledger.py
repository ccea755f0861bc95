"""The vectorized ledger times every shape exactly as StepModel does, for any profile."""

from __future__ import annotations

import numpy as np
import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision
from infercast.validate.ledger import Ledger, StepModels, expand, profile_matrix
from infercast.validate.setup import MEMORY_FRACTION, Setup

SETUPS = [
    Setup("llama-3.1-8b", "h100-sxm", "bf16", "bf16", 1, 1, 1, 256, 8192),
    Setup("llama-3.1-70b", "h200-sxm", "fp8", "fp8", 4, 1, 1, 1024, 8192),
    Setup("qwen3-30b-a3b", "b200", "fp4", "fp8", 2, 1, 2, 2048, 8192),
    Setup("deepseek-v3", "h200-sxm", "fp8", "fp8", 8, 1, 8, 2048, 8192),
    Setup("gpt-oss-20b", "h100-sxm", "fp4", "bf16", 1, 1, 1, 256, 8192),
    Setup("deepseek-v3", "b200", "fp4", "fp8", 8, 1, 8, 2048, 8192, attn_dp=True),
]
SHAPES = [((1, 512, 0),), ((32, 1, 2000),), ((7, 1, 300), (1, 4096, 8192)), ((3, 2048, 0),)]
PROFILES = [
    EfficiencyProfile(),
    EfficiencyProfile(
        mem_bw_eff=0.5, gemm_m_half=64, step_overhead_s=3e-3, attn_compute_eff=0.3, comm_bw_eff=0.4
    ),
    # products of up to 64 rows on their own curve (the CPU engine's small kernels)
    EfficiencyProfile(gemm_small_max_tokens=64, gemm_small_peak_ratio=1.7, gemm_small_m_half=3),
]


@pytest.mark.parametrize("prof", PROFILES)
def test_ledger_matches_step_model(prof):
    ledger = Ledger(StepModels())
    idx = {(s, sh): ledger.add(0, s, sh) for s in SETUPS for sh in SHAPES}
    times = ledger.times(profile_matrix([prof]))
    for (s, sh), i in idx.items():
        sm = StepModel(
            load_model(s.model),
            load_hardware(s.hardware),
            Precision.parse(s.weights, s.kv_cache),
            Parallelism(tp=s.tp, ep=s.ep, attn_dp=s.attn_dp),
            prof,
            memory_fraction=MEMORY_FRACTION,
        )
        assert times[i] == pytest.approx(sm.step_time_s(*expand(sh)), rel=1e-9)


def test_groups_use_their_own_profile():
    ledger = Ledger(StepModels())
    a, b = ledger.add(0, SETUPS[0], SHAPES[1]), ledger.add(1, SETUPS[0], SHAPES[1])
    t = ledger.times(profile_matrix(PROFILES))
    assert t[a] != t[b]
    assert ledger.add(0, SETUPS[0], SHAPES[1]) == a  # cached


def test_expand():
    new, cached = expand(((2, 1, 5), (1, 7, 0)))
    assert np.array_equal(new, [1, 1, 7]) and np.array_equal(cached, [5, 5, 0])


def test_timing_some_shapes_gives_their_times_and_nan_elsewhere():
    """A calibration fitting one group times only that group's shapes: the same numbers."""
    ledger = Ledger(StepModels())
    for g, s in enumerate(SETUPS[:3]):
        for sh in SHAPES:
            ledger.add(g % 2, s, sh)
    params = profile_matrix(PROFILES)
    every = ledger.times(params)
    some = np.array([1, 5, 6, 11])
    part = ledger.times(params, some)
    assert np.array_equal(part[some], every[some])
    assert np.isnan(np.delete(part, some)).all()
    ledger.add(0, SETUPS[3], SHAPES[0])  # a new shape: the subsets are rebuilt, not stale
    assert np.array_equal(ledger.times(params, some)[some], every[some])
