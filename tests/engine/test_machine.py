"""`infercast machine`: measurements are sane and the profile loads as hardware."""

from __future__ import annotations

import json

import pytest

from infercast.engine.machine_probe import probe, profile_mapping, to_toml
from infercast.specs.catalog import load_hardware


@pytest.fixture(scope="module")
def result():
    # Small sizes: this checks plumbing and units, not the machine's real peak.
    return probe(threads=1, runs=2, bandwidth_bytes=16 * 2**20, matmul_n=256)


def test_probe_reports_median_and_best(result):
    for m in result["measurements"].values():
        assert 0 < m["median"] <= m["best"] and m["runs"] == 2
    assert result["memory_bandwidth_bytes_per_s"] >= (
        result["measurements"]["matvec_fp32_bandwidth_bytes_per_s"]["best"])
    assert 1e8 < result["matmul_flops_per_s"]["fp32"] < 1e14  # a CPU core, in FLOP/s
    assert result["memory_bytes"] > 2**30


@pytest.mark.parametrize("suffix", ["toml", "json"])
def test_profile_is_accepted_by_load_hardware(result, tmp_path, suffix):
    profile = profile_mapping(result)
    path = tmp_path / f"local.{suffix}"
    path.write_text(to_toml(profile, "test") if suffix == "toml" else json.dumps(profile))
    hw = load_hardware(str(path))
    assert hw.memory_bandwidth_bytes_per_s == pytest.approx(
        result["memory_bandwidth_bytes_per_s"], rel=1e-5)
    assert hw.peak_flops("fp32") == pytest.approx(result["matmul_flops_per_s"]["fp32"], rel=1e-5)


def test_machine_command_rejects_a_bad_output_name(tmp_path, capsys):
    from infercast.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["machine", "--output", str(tmp_path / "profile.txt")])
    assert exc.value.code == 2
    assert ".toml or .json" in capsys.readouterr().err
