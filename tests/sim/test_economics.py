"""Dollars and energy of a simulate run (sim/economics.py) against hand calculations."""

import pytest

from infercast.cost.energy import power_model, token_energy
from infercast.errors import ConfigError
from infercast.sim.build import step_model
from infercast.sim.config import build_config
from infercast.sim.economics import RunUsage, check_price, dollars, economics
from infercast.sim.run import simulate


def _run(**kw):
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "weights": "bf16",
            "replicas": 2,
            "workload": {
                "num_requests": 200,
                "rate": 6.0,
                "input": {"mean": 512},
                "output": {"mean": 128},
            },
            **kw,
        }
    )
    sm = step_model(cfg)
    return cfg, sm, simulate(cfg, sm)


def test_dollars_are_gpu_hours_times_price_and_split_by_share():
    u = RunUsage(
        duration_s=1800.0,
        gpus=4,
        input_tokens=1e6,
        output_tokens=2e5,
        requests=1000,
        busy_replica_s=1000.0,
        mean_batch=8.0,
        replicas=4,
    )
    d = dollars(u, 2.5, 0.25)
    assert d["gpu_hours"] == 2.0 and d["usd"] == 5.0 and d["usd_per_hour"] == 10.0
    assert d["usd_per_million_input_tokens"] == pytest.approx(5.0 * 0.25 / 1e6 * 1e6)
    assert d["usd_per_million_output_tokens"] == pytest.approx(5.0 * 0.75 / 2e5 * 1e6)
    assert dollars(u, None, 0.25)["usd"] is None


def test_simulate_run_economics_by_hand():
    cfg, sm, res = _run()
    e = economics(res, cfg, sm, 3.0)
    d = res.to_dict()
    assert e["gpu_hours"] == pytest.approx(2 * d["duration_s"] / 3600)
    assert e["usd"] == pytest.approx(e["gpu_hours"] * 3.0)
    te = token_energy(
        sm,
        power_model(sm.hardware),
        round(d["total_input_tokens"] / d["num_completed"]),
        round(res.mean_batch_size),
        round(
            d["total_input_tokens"] / d["num_completed"]
            + d["total_output_tokens"] / d["num_completed"] / 2
        ),
    )
    hand = (
        80.3 * 2 * d["duration_s"]
        + te.prefill_dynamic_j_per_token * d["total_input_tokens"]
        + te.decode_dynamic_j_per_token * d["total_output_tokens"]
    )
    assert e["energy_j"] == pytest.approx(hand, rel=1e-9)
    assert e["joules_per_output_token"] == pytest.approx(hand / d["total_output_tokens"])
    # busy replicas draw more than idle ones, and less than two TDPs
    assert 2 * 80.3 < e["average_power_w"] < 2 * 700


def test_negative_price_is_a_config_error():
    with pytest.raises(ConfigError, match="`price`"):
        check_price(-1.0)
