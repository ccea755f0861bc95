"""The cost model's view of the CPU engine: the compute dtype it prices each weight format at."""

from __future__ import annotations

import pytest

from infercast.engine.config import named_config
from infercast.engine.predict import ENGINE_COMPUTE, compute_dtype, step_model
from infercast.engine.qlinear import WEIGHT_FORMATS
from infercast.specs.hardware import hardware_from_mapping


def _cpu_with_bf16_peak():
    """A CPU whose bf16 matmul peak (PyTorch's, AVX-512 BF16) is 4x its float32 one."""
    return hardware_from_mapping(
        {
            "name": "test-cpu",
            "memory_bytes": 2**34,
            "memory_bandwidth_bytes_per_s": 4e10,
            "link_bandwidth_bytes_per_s": 0.0,
            "price_per_hour": 0.0,
            "flops_per_s": {"fp32": 1.4e11, "bf16": 5.3e11},
        },
        "test",
    )


def test_every_weight_format_has_a_compute_dtype():
    assert set(ENGINE_COMPUTE) == set(WEIGHT_FORMATS)


@pytest.mark.parametrize("weights", [*WEIGHT_FORMATS, "q4+int8"])
def test_numpy_engine_computes_every_format_in_float32(weights, monkeypatch):
    # widened to float32 beyond 48 tokens, float32 activations in the numba loops
    import infercast.engine.qlinear as ql

    monkeypatch.setattr(ql, "INT_PREFILL", False)
    assert compute_dtype(weights) == "fp32"
    sm = step_model(named_config("tiny"), _cpu_with_bf16_peak(), weights=weights)
    assert sm.machine.compute_dtype == "fp32"
    assert sm.machine.peak_flops == pytest.approx(1.4e11)  # not the bf16 line's 5.3e11


@pytest.mark.parametrize("weights", ["q4", "int8", "q4+int8"])
def test_integer_prefill_computes_q4_and_int8_at_the_int8_peak(weights, monkeypatch):
    """Where their prefill runs the integer kernels (``qlinear.integer_prefill``) q4 and int8
    compute in int8, at the hardware's int8 peak; a hardware without one keeps fp32."""
    import infercast.engine.qlinear as ql
    from infercast.specs.hardware import hardware_from_mapping

    monkeypatch.setattr(ql, "integer_prefill", lambda fmt: fmt in ("q4", "int8"))
    base = _cpu_with_bf16_peak()
    hw = hardware_from_mapping(
        {
            "name": "test-cpu",
            "memory_bytes": base.memory_bytes,
            "memory_bandwidth_bytes_per_s": base.memory_bandwidth_bytes_per_s,
            "link_bandwidth_bytes_per_s": 0.0,
            "price_per_hour": 0.0,
            "flops_per_s": {**base.flops_per_s, "int8": 2.6e11},
        },
        "test",
    )
    assert compute_dtype(weights) == "int8" and compute_dtype("bf16") == "fp32"
    sm = step_model(named_config("tiny"), hw, weights=weights)
    assert sm.machine.compute_dtype == "int8" and sm.machine.peak_flops == pytest.approx(2.6e11)
    sm = step_model(named_config("tiny"), base, weights=weights)
    assert sm.machine.compute_dtype == "fp32" and sm.machine.peak_flops == pytest.approx(1.4e11)
    assert step_model(named_config("tiny"), hw, weights="bf16").machine.compute_dtype == "fp32"


def test_torch_backend_computes_in_bf16():
    assert compute_dtype("fp32", backend="torch") == "bf16"
    sm = step_model(named_config("tiny"), _cpu_with_bf16_peak(), backend="torch")
    assert sm.machine.peak_flops == pytest.approx(5.3e11)


def test_a_mixed_file_prices_its_head_in_the_heads_own_format():
    """``q4+int8`` (SmolLM2's Q4_1 layers and Q8_0 head, ``loader.weights_format``): int4
    layers, an int8 head; a single format has no separate head."""
    from infercast.engine.predict import layer_and_head, precision

    assert layer_and_head("q4+int8") == ("q4", "int8") and layer_and_head("bf16") == ("bf16",) * 2
    mixed = precision("q4+int8")
    assert (mixed.weights, mixed.head_weights) == ("int4", "int8")
    assert mixed.compute == compute_dtype("q4")  # fp32, or int8 on the integer kernels
    assert precision("q4").head_weights is None
    sm = step_model(named_config("tiny"), _cpu_with_bf16_peak(), weights="q4+int8")
    assert sm.precision.head_weights == "int8"
