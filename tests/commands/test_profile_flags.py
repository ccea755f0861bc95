"""--profile / --engine on estimate and simulate, and the profile reaching disaggregated pools."""

from __future__ import annotations

import json

import pytest

from infercast.cli import main
from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.profiles import load_profile_set, resolve_profile
from infercast.errors import ConfigError

SET = """[profile]
name = "t"
step_overhead_s = 0.004
[groups."hopper/vllm"]
step_overhead_s = 0.02
"""
SIM = [
    "simulate",
    "-m",
    "llama-3.1-8b",
    "--rate",
    "5",
    "--num-requests",
    "30",
    "--json",
    "--no-progress",
]
EST = ["estimate", "-m", "llama-3.1-8b", "--batch", "8", "--json"]


def run_json(args, capsys) -> dict:
    main(args)
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def pset(tmp_path):
    p = tmp_path / "set.toml"
    p.write_text(SET)
    return str(p)


def test_resolve_profile_groups(pset):
    assert resolve_profile("builtin", "h100-sxm") == EfficiencyProfile()
    assert resolve_profile(pset, "h100-sxm").step_overhead_s == 0.004
    assert resolve_profile(pset, "h100-sxm", "vLLM 0.8").step_overhead_s == 0.02
    assert (
        resolve_profile(pset, "b200", "vllm").step_overhead_s == 0.004
    )  # no blackwell group: default
    assert (
        resolve_profile("builtin", "h100-sxm", "vllm") == EfficiencyProfile()
    )  # no groups: its one profile


def test_shipped_profile_is_every_commands_default():
    shipped = load_profile_set("shipped")
    assert resolve_profile(None, "h100-sxm") == shipped.default
    assert resolve_profile(None, "h100-sxm", "vllm") == shipped.for_group("hopper/vllm")
    with pytest.raises(ConfigError, match="cannot be read"):
        resolve_profile("no-such-profile.toml", "h100-sxm")


def test_simulate_profile_and_engine(pset, capsys):
    tpot = {
        k: run_json(SIM + a, capsys)["tpot_s"]["mean"]
        for k, a in {
            "builtin": ["--profile", "builtin"],
            "file": ["--profile", pset],
            "group": ["--profile", pset, "--engine", "vllm"],
        }.items()
    }
    # the overhead is charged once per step (4 ms vs 20 ms); slower steps batch a little more
    assert tpot["group"] - tpot["file"] == pytest.approx(0.016, rel=0.15)
    assert tpot["builtin"] != tpot["file"]


def test_estimate_engine_group(pset, capsys):
    d = run_json(EST + ["--profile", pset, "--engine", "vllm"], capsys)
    assert d["profile"]["step_overhead_s"] == 0.02
    assert run_json(EST, capsys)["profile"]["name"] == "shipped"  # the default
    assert (
        run_json(EST + ["--profile", "builtin"], capsys)["profile"] == EfficiencyProfile().to_dict()
    )
    with pytest.raises(SystemExit) as exc:
        main(EST + ["--profile", "missing.toml"])
    assert exc.value.code == 2


def test_disaggregated_pools_share_the_profile(pset):
    from infercast.sim.build import pool_step_model, step_model
    from infercast.sim.config import build_config

    cfg = build_config({"model": "llama-3.1-8b", "tp": 1, "disaggregation": {"prefill": {"tp": 2}}})
    prof = load_profile_set(pset).for_group("hopper/vllm")
    target = step_model(cfg, profile=prof, memory_fraction=0.8)
    pool = pool_step_model(cfg, cfg.disaggregation.prefill, target)
    assert pool is not target and pool.parallel.tp == 2
    assert pool.profile == prof
    assert pool.memory.available_bytes == pytest.approx(0.8 * pool.memory.device_bytes)
    assert pool_step_model(cfg, cfg.disaggregation.decode, target) is target
