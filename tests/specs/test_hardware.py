"""Every listed hardware preset estimates at every dtype it has a peak for, and TP runs over PCIe
on parts without an NVLink-class link (as validate models L40S TP rows)."""

from __future__ import annotations

import pytest

from infercast.errors import ConfigError
from infercast.estimate import estimate
from infercast.specs.catalog import (
    hardware_names,
    is_estimable,
    listed_hardware_names,
    load_hardware,
)
from infercast.specs.parallel import Parallelism

WEIGHT_DTYPES = (
    "bf16",
    "fp16",
    "fp8",
    "int8",
    "fp4",
    "fp32",
)  # tf32 is a compute mode, not a weight format


@pytest.mark.parametrize("key", listed_hardware_names())
def test_listed_part_estimates_at_each_dtype_it_has_a_peak_for(key):
    hw = load_hardware(key)
    dtypes = [d for d in WEIGHT_DTYPES if hw.flops_per_s.get(d, 0) > 0]
    assert dtypes, key
    for dtype in dtypes:
        est = estimate("llama-3.1-8b", key, weights=dtype, batches=(1,))
        assert est.decode[0].step_time_s > 0, (key, dtype)


@pytest.mark.parametrize(
    "key",
    [
        k
        for k in listed_hardware_names()
        if load_hardware(k).link_bandwidth_bytes_per_s <= 0
        and load_hardware(k).pcie_bandwidth_bytes_per_s > 0
    ],
)
def test_tp_over_pcie(key):
    hw = load_hardware(key)
    dtype = next(d for d in WEIGHT_DTYPES if hw.flops_per_s.get(d, 0) > 0)
    est = estimate("llama-3.1-8b", key, weights=dtype, batches=(1,), parallel=Parallelism(tp=2))
    assert any("crosses PCIe" in n for n in est.notes)
    one = estimate("llama-3.1-8b", key, weights=dtype, batches=(1,))
    # Half the weights per GPU, but every layer's two all-reduces cross PCIe: the step is not free.
    assert est.decode[0].step_time_s != one.decode[0].step_time_s


def test_l40s_tp2_all_reduce_is_paid_at_pcie_speed():
    # The cost model's TP link is the L40S's PCIe Gen4 x16 (31 GB/s per direction), not zero.
    est = estimate("llama-3.1-8b", "l40s", weights="bf16", batches=(1,), parallel=Parallelism(tp=2))
    assert (
        est.step_model.hardware.link_bandwidth_bytes_per_s
        == load_hardware("l40s").pcie_bandwidth_bytes_per_s
    )


def test_unlisted_parts_lack_bandwidth_or_a_peak_and_say_so():
    hidden = [k for k in hardware_names() if k not in listed_hardware_names()]
    assert hidden and all(not is_estimable(load_hardware(k)) for k in hidden)
    with pytest.raises(ConfigError):
        estimate("llama-3.1-8b", hidden[0], weights="bf16")


def test_tp_without_any_link_is_one_clear_error():
    no_link = next(
        k
        for k in listed_hardware_names()
        if load_hardware(k).link_bandwidth_bytes_per_s <= 0
        and load_hardware(k).pcie_bandwidth_bytes_per_s <= 0
    )
    with pytest.raises(ConfigError, match="no scale-up link and no PCIe bandwidth"):
        estimate("llama-3.1-8b", no_link, weights="bf16", parallel=Parallelism(tp=2))
