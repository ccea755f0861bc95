"""cost/efficiency.py: reading a profile TOML checks its fields as a profile set's do."""

import pytest

from infercast.cost.efficiency import load_profile, profile_fields
from infercast.errors import ConfigError


def test_load_profile_rejects_a_known_field_that_is_not_a_number(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text('mem_bw_eff = "0.5"\n')
    with pytest.raises(ConfigError, match="mem_bw_eff = '0.5' is not a number"):
        load_profile(p)


def test_profile_fields_keeps_numbers_of_known_fields_and_names_unknown_ones():
    assert profile_fields({"name": "x", "mem_bw_eff": 1, "fit": {}}, "here") == {"mem_bw_eff": 1.0}
    with pytest.raises(ConfigError, match="here has unknown field"):
        profile_fields({"mem_bw_efff": 0.5}, "here")
