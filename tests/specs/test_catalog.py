"""Device capacity as CUDA/ROCm exposes it (``data/hardware_capacity.csv``) wins over the
datasheet figure, for the measured part and for its same-memory variants.

Figures (each cited in the csv): B200 178.35 GiB (a CUDA device query, pytorch/ao PR 4002)
against the 180 GB (1.8e11 bytes) hardware.csv keeps; A100-SXM4-80GB 85,100,068,864 bytes
(CUDA deviceQuery); L40S 47,803,596,800 bytes, below its 48 GB datasheet figure (ECC on).
"""

from __future__ import annotations

import pytest

from infercast.specs.catalog import hardware_names, load_hardware, visible_capacities

GiB = 2**30


def test_every_measured_capacity_names_a_catalogued_part_and_cites_its_source():
    names = set(hardware_names())
    for key, (bytes_visible, citation) in visible_capacities().items():
        assert key in names, key
        assert citation, key
        spec = load_hardware(key).memory_bytes_spec
        # a measurement, not a different part: within 15 % of the datasheet figure
        assert abs(bytes_visible / spec - 1) < 0.15, (key, bytes_visible, spec)


def test_measured_capacity_replaces_the_datasheet_figure_and_keeps_it():
    b200 = load_hardware("b200")
    assert b200.memory_bytes == pytest.approx(178.35 * GiB, abs=1)
    assert b200.memory_bytes_spec == 1.8e11
    assert "memory_visible" in b200.citations
    l40s = load_hardware("l40s")
    assert l40s.memory_bytes == 47_803_596_800 < l40s.memory_bytes_spec


@pytest.mark.parametrize(
    ("variant", "parent"), [("a100-sxm-80gb-330w", "a100-sxm-80gb"), ("h200-sxm-1000w", "h200-sxm")]
)
def test_a_same_memory_variant_uses_its_parents_measured_capacity(variant, parent):
    hw, base = load_hardware(variant), load_hardware(parent)
    assert variant not in visible_capacities()
    assert hw.memory_bytes == base.memory_bytes > hw.memory_bytes_spec
    assert hw.citations["memory_visible"] == base.citations["memory_visible"]


def test_a_part_without_a_measurement_keeps_its_datasheet_figure():
    gh200 = load_hardware("gh200-144gb")  # a variant of gh200 with more memory; neither measured
    assert gh200.memory_bytes == gh200.memory_bytes_spec == 1.44e11
    assert "memory_visible" not in gh200.citations
