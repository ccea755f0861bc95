"""A mixed fleet: an always-on base pool of another part beside the policy's replicas."""

import numpy as np
import pytest

from infercast.errors import ConfigError
from infercast.fleet.day import build_replica, make_policy, run_day
from infercast.fleet.load import DayLoad
from infercast.fleet.policies import Observation, Predictive
from infercast.fleet.run import BasePool, FleetSpec
from infercast.sim.config import build_config
from infercast.sim.workload import Trace

PRICE, BASE_PRICE = 3.0, 2.0


@pytest.fixture(scope="module")
def mixed_day():
    """20 minutes at 3 -> 15 -> 3 req/s; H100 replicas scaled, one H200 always on."""
    common = {
        "model": "llama-3.1-8b",
        "weights": "bf16",
        "slo_ttft_s": 1.0,
        "slo_tpot_s": 0.05,
        "scheduler": {"max_model_len": 2048, "max_num_seqs": 16},
    }
    rates = np.concatenate([np.full(5, 3.0), np.full(10, 15.0), np.full(5, 3.0)])
    lengths = Trace("t", np.zeros(3), np.array([300, 600, 1500]), np.array([200, 400, 50]))
    load = DayLoad(rates, "test", lengths)
    main = build_replica(
        build_config({**common, "hardware": "h100-sxm"}), load, PRICE, warmup_s=30.0
    )
    base = build_replica(
        build_config({**common, "hardware": "h200-sxm"}), load, BASE_PRICE, warmup_s=30.0
    )
    pol = make_policy("predictive", main, load, 60.0, base_capacity_rps=base.capacity_rps)
    out = run_day(main, load, pol, FleetSpec(main.start_s, 1), base, 1)
    return main, base, out


def test_mixed_day_conserves_requests_and_the_base_pool_serves(mixed_day):
    _, _, out = mixed_day
    d = out["day"]
    assert d["requests_completed"] + d["requests_rejected"] == d["requests_arrived"] > 0
    assert 0 < d["base_pool"]["requests_completed"] < d["requests_completed"]


def test_mixed_day_dollars_are_each_pools_hours_times_its_price(mixed_day):
    main, base, out = mixed_day
    d, b = out["day"], out["day"]["base_pool"]
    main_h = d["replica_hours"] - b["replica_hours"]
    assert (
        b["replicas"] == 1 and 20 / 60 <= b["replica_hours"] <= d["end_s"] / 3600
    )  # on all day, then drained
    assert b["usd"] == pytest.approx(b["replica_hours"] * base.gpus * BASE_PRICE)
    assert d["usd"] == pytest.approx(main_h * main.gpus * PRICE + b["usd"])
    assert d["usd"] == pytest.approx(sum(t["usd"] for t in out["ticks"]))


def test_predictive_sizes_only_what_the_base_pool_does_not_serve():
    obs = Observation(600.0, 1, 0, 0.0, 0.1, 0.5, (10.0,) * 10)
    alone = Predictive(4.0, 120.0, 1, 10, headroom=1.0)
    beside = Predictive(4.0, 120.0, 1, 10, headroom=1.0, base_capacity_rps=6.0)
    assert (alone.desired(obs), beside.desired(obs)) == (3, 1)  # ceil(10 / 4), ceil((10 - 6) / 4)


def test_base_pool_needs_a_replica():
    with pytest.raises(ConfigError, match="--base-replicas"):
        BasePool(None, None, 0, 1.0)
