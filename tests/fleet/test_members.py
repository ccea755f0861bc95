"""Disaggregated fleet members: units of prefill and decode replicas, scaled and billed whole."""

import numpy as np
import pytest

from infercast.cost.energy import power_model, token_energy
from infercast.fleet.day import build_replica, make_policy, run_day
from infercast.fleet.load import DayLoad
from infercast.fleet.members import DisaggUnit, unit_shape, unit_token_energy
from infercast.fleet.run import FleetSpec
from infercast.sched import Request
from infercast.sim.build import step_model
from infercast.sim.config import build_config
from infercast.sim.kernel import Kernel
from infercast.sim.workload import Trace

PRICE = 3.0
COMMON = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "weights": "bf16",
    "slo_ttft_s": 1.0,
    "slo_tpot_s": 0.05,
    "scheduler": {"max_model_len": 2048, "max_num_seqs": 24},
}


def _cfg(prefill=1, decode=2, decode_tp=None):
    dec = {"replicas": decode, **({"tp": decode_tp} if decode_tp else {})}
    return build_config(
        {**COMMON, "disaggregation": {"prefill": {"replicas": prefill}, "decode": dec}}
    )


@pytest.fixture(scope="module")
def day():
    """30 minutes at 2 -> 25 -> 2 req/s on units of 1 prefill + 2 decode replicas (1 GPU each)."""
    rates = np.concatenate([np.full(8, 2.0), np.full(14, 25.0), np.full(8, 2.0)])
    lengths = Trace(
        "t", np.zeros(4), np.array([200, 400, 3000, 100]), np.array([400, 800, 20, 300])
    )
    load = DayLoad(rates, "test", lengths)
    rep = build_replica(_cfg(), load, PRICE, storage_bytes_per_s=16e9 / 240, warmup_s=60.0)
    out = {}
    for name in ("fixed", "reactive"):
        pol = make_policy(name, rep, load, 60.0)
        first = pol.replicas if name == "fixed" else 1
        out[name] = run_day(rep, load, pol, FleetSpec(rep.start_s, first, max_queue_s=120.0))
    return load, rep, out


def test_a_unit_has_every_pools_gpus_and_loads_all_their_weights(day):
    _, rep, _ = day
    assert rep.gpus == 3 and rep.unit.gpus == 3
    one = rep.timer.memory.weight_bytes  # one GPU's weights (TP1 pools)
    assert rep.start_s == pytest.approx(3 * one / (16e9 / 240) + 60.0)
    wide = unit_shape(_cfg(2, 1, decode_tp=2), step_model(_cfg(2, 1, decode_tp=2)))
    assert (wide.prefill_gpus, wide.decode_gpus, wide.gpus) == (2, 2, 4)


@pytest.mark.parametrize("name", ["fixed", "reactive"])
def test_every_request_is_completed_or_rejected_with_a_reason(day, name):
    d = day[2][name]["day"]
    assert d["requests_arrived"] > 1000
    assert d["requests_completed"] + d["requests_rejected"] == d["requests_arrived"]
    assert sum(d["reject_reasons"].values()) == d["requests_rejected"] > 0  # 3000-token prompts
    assert all(reason for reason in d["reject_reasons"])


@pytest.mark.parametrize("name", ["fixed", "reactive"])
def test_dollars_are_unit_gpu_hours_times_price(day, name):
    out = day[2][name]
    d = out["day"]
    billed_h = sum(b - a for a, b in out["intervals"]) / 3600
    assert d["replica_hours"] == pytest.approx(billed_h, rel=1e-12)
    assert d["gpu_hours"] == pytest.approx(3 * billed_h, rel=1e-12)
    assert d["usd"] == pytest.approx(3 * billed_h * PRICE, rel=1e-12)


def test_the_autoscaler_scales_whole_units(day):
    fixed, reactive = day[2]["fixed"]["day"], day[2]["reactive"]["day"]
    assert reactive["peak_replicas"] > 1
    assert reactive["replica_hours"] < fixed["replica_hours"] * fixed["peak_replicas"]


def test_unit_energy_is_each_pools_per_token_energy_and_every_gpus_idle_power(day):
    _, rep, _ = day
    pw = power_model(rep.timer.hardware)
    te = unit_token_energy(rep.unit, pw, 500, 20, 700)
    pools = rep.unit.pools
    pre = token_energy(pools.prefill_sm, pw, 500, 10, 700)
    dec = token_energy(pools.decode_sm, pw, 500, 10, 700)  # 20 running over 2 decode replicas
    assert te.prefill_dynamic_j_per_token == pre.prefill_dynamic_j_per_token
    assert te.decode_dynamic_j_per_token == dec.decode_dynamic_j_per_token
    assert te.idle_w == pytest.approx(3 * pw.idle_w)


def test_a_unit_counts_a_request_from_arrival_to_record_through_its_transfer():
    cfg = _cfg()
    timer = step_model(cfg)
    kernel, records = Kernel(), []
    unit = DisaggUnit(7, unit_shape(cfg, timer), kernel, lambda rec, i: records.append((rec, i)))
    for k in range(6):
        unit.submit(Request(str(k), 300 + 10 * k, 50, 0.0))
    unit.submit(Request("long", 2000, 100, 0.0))  # over max_model_len: rejected by prefill
    assert unit.outstanding_tokens == sum(350 + 10 * k for k in range(6)) + 2100
    assert unit.sched.has_unfinished and unit.sched.num_waiting + unit.sched.num_running >= 6
    kernel.run()
    assert sorted(rec.request_id for rec, _ in records) == sorted([*map(str, range(6)), "long"])
    assert {i for _, i in records} == {7}  # every record names the unit, not its replica
    assert sum(rec.ok for rec, _ in records) == 6
    assert all(rec.output_tokens == 50 for rec, _ in records if rec.ok)
    assert unit.outstanding_tokens == 0 and not unit.sched.has_unfinished
    assert 0 < unit.stats.busy_s and unit.sched.kv.usage == 0.0


def test_a_unit_on_two_parts_prices_and_powers_each_pool_at_its_own_part():
    from infercast.fleet.day import _unit_price

    cfg = build_config(
        {
            **COMMON,
            "disaggregation": {
                "prefill": {"replicas": 1, "hardware": "b200"},
                "decode": {"replicas": 2},
            },
        }
    )
    shape = unit_shape(cfg, step_model(cfg))
    assert (shape.prefill_hardware, shape.decode_hardware) == ("b200", "h100-sxm")
    assert "b200 TP1" in shape.describe() and "h100-sxm TP1" in shape.describe()
    price, source = _unit_price(shape, None, (5.0, 2.0))
    assert price * shape.gpus == pytest.approx(1 * 5.0 + 2 * 2.0) and "b200 5.00" in source
    assert _unit_price(shape, 3.0, (None, None))[0] == pytest.approx(3.0)
    pb = power_model(shape.pools.prefill_sm.hardware)
    p100 = power_model(shape.pools.decode_sm.hardware)
    te = unit_token_energy(shape, pb, 500, 20, 700, p100)
    pre = token_energy(shape.pools.prefill_sm, pb, 500, 10, 700)
    dec = token_energy(shape.pools.decode_sm, p100, 500, 10, 700)
    assert te.prefill_dynamic_j_per_token == pre.prefill_dynamic_j_per_token
    assert te.decode_dynamic_j_per_token == dec.decode_dynamic_j_per_token
    assert te.idle_w == pytest.approx(pre.idle_w + 2 * dec.idle_w)
    assert pre.idle_w != dec.idle_w  # a B200 idles above an H100
