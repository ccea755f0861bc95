"""The energy model (cost/energy.py) against hand calculations from power.csv's figures."""

import pytest

from infercast.cost.energy import (
    PowerModel,
    power_model,
    run_energy_j,
    step_energy_j,
    tensor_activity,
    token_energy,
)
from infercast.cost.ops import ATTENTION, GEMM
from infercast.cost.step import StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.hardware import HardwareSpec
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision


def test_h100_row_is_the_cited_figures():
    p = power_model(load_hardware("h100-sxm"))
    assert (p.idle_w, p.memory_bound_w, p.compute_bound_w, p.max_w) == (80.3, 267.0, 700.0, 700.0)


def test_busy_power_interpolates_and_caps():
    p = PowerModel("x", 50.0, 200.0, 600.0, 500.0, "test")
    assert p.busy_power_w(0.0) == 200.0
    assert p.busy_power_w(0.25) == pytest.approx(200 + 0.25 * 400)
    assert p.busy_power_w(1.0) == 500.0  # the TDP cap, not 600
    # 2 s at 25% of a 1e15 FLOP/s peak: 300 W x 2 s
    assert p.energy_j(2.0, 0.25 * 1e15 * 2.0, 1e15) == pytest.approx(600.0)


def test_step_energy_by_hand_tp2():
    """A TP2 decode step: each matmul op busy for its FLOPs at its achieved rate (bf16 GEMM:
    gemm_compute_eff x m / (m + gemm_m_half) of the dense bf16 peak), over the step -> watts
    per GPU, times 2 GPUs."""
    hw = load_hardware("h100-sxm")
    sm = StepModel(load_model("llama-3.1-8b"), hw, Precision.parse("bf16"), Parallelism(tp=2))
    cost = sm.decode_cost(32, 1024)
    eff, peak = sm.profile, hw.flops_per_s["bf16"]
    busy = 0.0
    for o in cost.ops:
        if o.op.kind == GEMM:
            busy += min(
                o.time_s, o.op.flops / (peak * eff.gemm_compute_eff * 32 / (32 + eff.gemm_m_half))
            )
        elif o.op.kind == ATTENTION:
            busy += min(o.time_s, o.op.flops / (sm.machine.attn_peak_flops * eff.attn_compute_eff))
    hand = (267.0 + (700.0 - 267.0) * busy / cost.time_s) * cost.time_s * 2
    assert step_energy_j(sm, cost, power_model(hw)) == pytest.approx(hand, rel=1e-12)


def test_tensor_activity_exceeds_flops_over_peak_and_grows_with_batch():
    """A GEMM at a fraction of peak engages the tensor units longer than W / peak says."""
    sm = StepModel(load_model("mistral-7b"), load_hardware("h100-sxm"), Precision.parse("bf16"))
    acts = []
    for b in (1, 32, 128):
        c = sm.decode_cost(b, 256)
        acts.append(tensor_activity(sm, c))
        assert c.flops / (sm.machine.peak_flops * c.time_s) < acts[-1] <= 1.0
    assert acts[0] < 0.1 < acts[1] < acts[2]


def test_run_energy_is_idle_plus_token_dynamic():
    hw = load_hardware("h100-sxm")
    sm = StepModel(load_model("llama-3.1-8b"), hw, Precision.parse("bf16"))
    te = token_energy(sm, power_model(hw), 512, 16, 700)
    assert te.idle_w == 80.3
    dec = sm.decode_cost(16, 700)
    assert te.decode_dynamic_j_per_token == pytest.approx(
        (step_energy_j(sm, dec, power_model(hw)) - 80.3 * dec.time_s) / 16
    )
    assert run_energy_j(te, 3600.0, 1e6, 2e5) == pytest.approx(
        80.3 * 3600 + te.prefill_dynamic_j_per_token * 1e6 + te.decode_dynamic_j_per_token * 2e5
    )


def test_part_without_row_uses_tdp_fractions_and_without_tdp_errors():
    p = power_model(load_hardware("l40s"))
    assert p.max_w == 350 and p.idle_w == pytest.approx(350 * 80.3 / 700) and "assumed" in p.source
    bare = HardwareSpec(
        key="mine",
        name="mine",
        memory_bytes=1e9,
        memory_bandwidth_bytes_per_s=1e11,
        flops_per_s={"bf16": 1e13},
    )
    with pytest.raises(ConfigError, match="tdp_w"):
        power_model(bare)


def test_estimate_reports_energy_per_decode_row():
    from infercast.estimate import estimate

    e = estimate(
        "llama-3.1-8b", "h100-sxm", weights="bf16", batches=(1, 64), context=1024
    ).to_dict()
    rows = e["decode"]
    assert rows[0]["joules_per_output_token"] > rows[1]["joules_per_output_token"] > 0
    assert rows[1]["average_power_w"] == pytest.approx(
        rows[1]["joules_per_output_token"] * rows[1]["tokens_per_s"]
    )
    assert e["energy"]["power"]["source"] == "power.csv"
