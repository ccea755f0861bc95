"""Profile files: the compute dtype a fitted profile records (``profile_compute``)."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import load_profile
from infercast.cost.profiles import profile_compute
from infercast.errors import ConfigError


@pytest.mark.parametrize("path", [None, "shipped", "builtin"])
def test_shipped_and_builtin_profiles_record_no_compute(path):
    assert profile_compute(path) is None


def test_a_profile_file_records_its_compute_dtype(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[profile]\nname = "cpu"\ncompute = "float32"\nmem_bw_eff = 0.8\n')
    assert profile_compute(str(path)) == "fp32"  # normalized
    assert load_profile(path).mem_bw_eff == 0.8  # the text field does not disturb the loader
    path.write_text('[profile]\nname = "cpu"\nmem_bw_eff = 0.8\n')
    assert profile_compute(str(path)) is None


def test_an_unknown_compute_dtype_is_one_error_naming_the_field(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[profile]\ncompute = "fp12"\n')
    with pytest.raises(ConfigError, match="`compute`.*fp12"):
        profile_compute(str(path))
