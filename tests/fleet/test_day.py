"""A short synthetic fleet day: conservation, dollars = replica-hours x price, energy by hand,
policies."""

import math

import numpy as np
import pytest

from infercast.cost.energy import power_model, token_energy
from infercast.errors import ConfigError
from infercast.fleet.day import build_replica, make_policy, run_day
from infercast.fleet.ledger import replica_seconds_per_tick
from infercast.fleet.load import DayLoad, day_load, diurnal_rates, trace_rates
from infercast.fleet.policies import Fixed, Observation, Predictive, Reactive, parse_schedule
from infercast.fleet.run import FleetSpec
from infercast.sim.config import build_config
from infercast.sim.workload import Trace

PRICE = 3.0


@pytest.fixture(scope="module")
def day():
    """40 minutes: 2 req/s rising to 12 req/s and back, short requests, a 5-minute replica start."""
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "weights": "bf16",
            "slo_ttft_s": 1.0,
            "slo_tpot_s": 0.05,
            "scheduler": {"max_model_len": 2048, "max_num_seqs": 24},
        }
    )
    rates = np.concatenate([np.full(10, 2.0), np.full(20, 12.0), np.full(10, 2.0)])
    lengths = Trace(
        "t", np.zeros(4), np.array([200, 400, 3000, 100]), np.array([400, 800, 20, 300])
    )
    load = DayLoad(rates, "test", lengths)
    rep = build_replica(cfg, load, PRICE, storage_bytes_per_s=16e9 / 240, warmup_s=60.0)
    return cfg, load, rep


_RUNS: dict = {}


def _run(day, name, **kw):
    """One policy's day, run once per module (the tests only read it)."""
    key = (name, tuple(sorted(kw.items())))
    if key not in _RUNS:
        _RUNS[key] = _run_once(day, name, **kw)
    return _RUNS[key]


def _run_once(day, name, **kw):
    cfg, load, rep = day
    pol = make_policy(name, rep, load, 60.0, **kw)
    first = pol.replicas if name == "fixed" else 1
    return run_day(rep, load, pol, FleetSpec(rep.start_s, first, max_queue_s=120.0))


def test_start_time_is_weights_over_bandwidth_plus_warmup(day):
    _, _, rep = day
    assert rep.start_s == pytest.approx(rep.timer.memory.weight_bytes / (16e9 / 240) + 60.0)
    assert 240 < rep.start_s < 430


@pytest.mark.parametrize("name", ["fixed", "reactive", "scheduled", "predictive"])
def test_every_request_is_completed_or_rejected_with_a_reason(day, name):
    out = _run(day, name)
    d = out["day"]
    assert d["requests_arrived"] > 0
    assert d["requests_completed"] + d["requests_rejected"] == d["requests_arrived"]
    assert sum(d["reject_reasons"].values()) == d["requests_rejected"]
    assert all(reason for reason in d["reject_reasons"])
    # the 3000-token prompts exceed max_model_len 2048: rejected by the scheduler, with its rule
    assert any("max_model_len" in r or "longer" in r or "exceeds" in r for r in d["reject_reasons"])
    assert sum(t["completed"] + t["rejected"] for t in out["ticks"]) == d["requests_arrived"]


@pytest.mark.parametrize("name", ["fixed", "reactive", "predictive"])
def test_dollars_are_replica_hours_times_price(day, name):
    out = _run(day, name)
    d = out["day"]
    billed_s = sum(b - a for a, b in out["intervals"])
    assert d["replica_hours"] == pytest.approx(billed_s / 3600, rel=1e-12)
    assert d["usd"] == pytest.approx(d["replica_hours"] * 1 * PRICE, rel=1e-12)  # 1 GPU per replica
    assert sum(t["usd"] for t in out["ticks"]) == pytest.approx(d["usd"], rel=1e-9)


def test_energy_by_hand(day):
    cfg, load, rep = day
    out = _run(day, "fixed", replicas=2)
    d = out["day"]
    pw = power_model(rep.timer.hardware)
    running = [
        t["running"] / max(t["replicas_ready"] + t["replicas_draining"], 1)
        for t in out["ticks"]
        if t["running"]
    ]
    mean_in, mean_out = np.mean(load.lengths.prompt_tokens), np.mean(load.lengths.output_tokens)
    te = token_energy(
        rep.timer,
        pw,
        round(mean_in),
        max(1, round(float(np.mean(running)))),
        round(mean_in + mean_out / 2),
    )
    hand = (
        80.3 * d["replica_hours"] * 3600
        + te.prefill_dynamic_j_per_token * d["input_tokens"]
        + te.decode_dynamic_j_per_token * d["output_tokens"]
    )
    assert d["energy_kwh"] * 3.6e6 == pytest.approx(hand, rel=1e-9)


def test_autoscalers_add_replicas_under_the_peak_and_cost_less_than_peak_sizing(day):
    fixed = _run(day, "fixed")["day"]
    reactive = _run(day, "reactive")["day"]
    assert reactive["peak_replicas"] > 1
    assert reactive["replica_hours"] < fixed["replica_hours"] * fixed["peak_replicas"]


def test_replica_seconds_split_exactly_over_ticks():
    s = replica_seconds_per_tick([(30.0, 150.0), (0.0, 60.0)], 60.0, 4)
    assert s.tolist() == [90.0, 60.0, 30.0, 0.0]


def test_policies_reject_impossible_bounds():
    with pytest.raises(ConfigError, match="max-replicas"):
        Reactive("queue", 4, 1, 5, 2)
    with pytest.raises(ConfigError, match="scale-down"):
        Reactive("queue", 1, 4, 1, 4)
    with pytest.raises(ConfigError, match="min-replicas"):
        Predictive(10.0, 60.0, 0, 4)
    with pytest.raises(ConfigError, match="replicas"):
        Fixed(0)
    with pytest.raises(ConfigError, match="hour 0"):
        parse_schedule("8:2")


def test_reactive_and_predictive_decisions():
    obs = Observation(0.0, 2, 0, 9.0, 0.5, 0.9, (1.0, 2.0, 3.0, 4.0))
    assert Reactive("queue", 4, 0.5, 1, 3).desired(obs) == 3
    assert Reactive("queue", 4, 0.5, 1, 2).desired(obs) == 2  # capped
    p = Predictive(1.0, 120.0, 1, 10)
    assert p.forecast([2.0] * 10) == pytest.approx(2.0)
    assert p.forecast([1.0, 2.0, 3.0, 4.0, 5.0]) > 5.0  # a rising trend is extrapolated
    assert p.desired(obs) >= math.ceil(4.0 * 1.25)


def test_load_curves():
    r = diurnal_rates(10.0, 24.0, 0.2, 14.0)
    assert (
        r.size == 1440
        and r.max() == pytest.approx(10.0, rel=1e-4)
        and r.min() == pytest.approx(2.0, rel=1e-4)
    )
    assert int(np.argmax(r)) // 60 in (13, 14)
    tr = Trace("t", np.array([0.0, 10.0, 70.0, 130.0, 150.0]), np.ones(5, int), np.ones(5, int))
    assert trace_rates(tr).tolist() == pytest.approx([2 / 60, 1 / 60, 2 / 60])
    assert trace_rates(tr, hours=0.1).sum() * 60 == pytest.approx(5.0)  # stretched: same requests
    with pytest.raises(ConfigError, match="peak-rate"):
        day_load(-1.0, 24.0)


def test_reactive_waits_a_stabilization_window_before_scaling_down():
    r = Reactive("queue", 4, 0.5, 1, 5, stabilization_s=300)
    low = [Observation(t, 3, 0, 0.0, 0.1, 0.2) for t in (60.0, 120.0, 300.0, 360.0, 420.0)]
    assert [r.desired(o) for o in low] == [3, 3, 3, 2, 3]  # 300 s after 60 s; then a new window


def test_sharded_day_adds_up_and_agrees_with_one_group(day):
    from infercast.fleet.shard import merge, run_sharded, split_bounds

    cfg, load, rep = day
    spec = FleetSpec(rep.start_s, 2, max_queue_s=120.0)
    one = _run(day, "fixed", replicas=2)["day"]
    out = run_sharded(rep, load, "fixed", {"replicas": 2}, spec, 2, "serial")
    two, groups = out["day"], out["groups"]
    assert two["requests_arrived"] == sum(g["requests_arrived"] for g in groups)
    assert two["usd"] == pytest.approx(sum(g["usd"] for g in groups))
    assert two["requests_completed"] + two["requests_rejected"] == two["requests_arrived"]
    assert two["replica_hours"] == pytest.approx(
        one["replica_hours"], rel=0.01
    )  # 1 + 1 replicas vs 2
    assert abs(two["requests_arrived"] - one["requests_arrived"]) < 5 * math.sqrt(
        one["requests_arrived"]
    )
    assert split_bounds({"replicas": 5, "max_replicas": 9, "min_replicas": 1}, 2) == {
        "replicas": 3,
        "max_replicas": 5,
        "min_replicas": 1,
    }
    assert (
        merge([{"day": groups[0]}], load.duration_s)["day"]["requests_arrived"]
        == groups[0]["requests_arrived"]
    )
