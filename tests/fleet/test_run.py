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
    with pytest.raises(ConfigError, match="`base_count`"):
        BasePool(None, None, 0, 1.0)


def test_capped_columns_keep_the_days_aggregates_exact():
    """A day whose per-request columns are capped far below its request count reports the same
    counts, tokens, SLO attainment, dollars and energy as one keeping every value."""
    cfg = build_config({"model": "llama-3.1-8b", "hardware": "h100-sxm", "weights": "bf16"})
    load = DayLoad(np.full(6, 6.0), "test", None, 256, 64)
    rep = build_replica(cfg, load, PRICE, capacity_rps=20.0)
    pol = make_policy("fixed", rep, load, 60.0, replicas=2)
    exact = run_day(rep, load, pol, FleetSpec(rep.start_s, 2, column_cap=None))["day"]
    capped = run_day(rep, load, pol, FleetSpec(rep.start_s, 2, column_cap=64))["day"]
    assert exact["requests_arrived"] > 1000  # the cap (64 values) is far exceeded
    for key in (
        "requests_arrived",
        "requests_completed",
        "input_tokens",
        "output_tokens",
        "slo_attainment",
        "usd",
        "energy_kwh",
    ):
        assert capped[key] == exact[key], key
    assert capped["ttft_p99_s"] == pytest.approx(exact["ttft_p99_s"], rel=0.1)


def test_column_cap_must_be_positive():
    with pytest.raises(ConfigError, match="column_cap"):
        FleetSpec(60.0, 1, column_cap=0)
