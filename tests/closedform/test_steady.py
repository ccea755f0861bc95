"""The closed-form closed loop agrees with the simulator (exact mode) on the same setups."""

from __future__ import annotations

import pytest

from infercast.closedform.steady import closed_loop
from infercast.cost.step import StepModel
from infercast.sim.config import build_config
from infercast.sim.run import simulate
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision
from infercast.validate.ledger import expand


@pytest.fixture(scope="module")
def sm():
    return StepModel(
        load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision.parse("bf16"), max_seqs=256
    )


def _metrics(sm, clients, i, o, waves):
    cl = closed_loop(clients, 256, i, o, 8192, waves)
    return cl.metrics([sm.step_time_s(*expand(s)) for s in cl.shapes])


def test_one_client_is_prefill_then_decode(sm):
    m = _metrics(sm, 1, 1024, 256, None)
    assert m["ttft_s"] == pytest.approx(sm.prefill_cost(1024).time_s, rel=1e-9)
    assert m["tpot_s"] == pytest.approx(sm.step_time_s([1], [1024 + 128]), rel=1e-9)


@pytest.mark.parametrize(("clients", "i", "o"), [(8, 1024, 256), (32, 2048, 128), (64, 512, 512)])
def test_waves_match_the_simulator(sm, clients, i, o):
    m = _metrics(sm, clients, i, o, 3)
    cfg = build_config(
        {
            "mode": "exact",
            "scheduler": {"policy": "chunked", "max_num_seqs": 256},
            "workload": {
                "arrival": "closed",
                "concurrency": clients,
                "num_requests": 3 * clients,
                "input": {"dist": "fixed", "mean": i},
                "output": {"dist": "fixed", "mean": o},
            },
        }
    )
    s = simulate(cfg, sm).summary
    assert m["ttft_s"] == pytest.approx(s.ttft.mean, rel=0.1)
    assert m["tpot_s"] == pytest.approx(s.tpot.mean, rel=0.12)
    assert m["output_tokens_per_s"] == pytest.approx(s.output_throughput_tps, rel=0.05)


def test_clients_beyond_the_running_limit_queue(sm):
    free = closed_loop(16, 16, 512, 128, 8192).metrics([0.01, 0.05])
    capped = closed_loop(32, 16, 512, 128, 8192).metrics([0.01, 0.05])
    assert capped["output_tokens_per_s"] == pytest.approx(free["output_tokens_per_s"])
    assert capped["ttft_s"] == pytest.approx(free["ttft_s"] + free["request_latency_s"])


@pytest.mark.parametrize(("limit", "clients", "waves"), [(16, 64, 5), (32, 48, 5)])
def test_queue_beyond_the_limit_matches_the_simulator(limit, clients, waves):
    sm = StepModel(
        load_model("llama-3.1-8b"),
        load_hardware("h100-sxm"),
        Precision.parse("bf16"),
        max_seqs=limit,
    )
    cl = closed_loop(clients, limit, 512, 128, 8192, waves)
    m = cl.metrics([sm.step_time_s(*expand(s)) for s in cl.shapes])
    cfg = build_config(
        {
            "mode": "exact",
            "scheduler": {"policy": "chunked", "max_num_seqs": limit},
            "workload": {
                "arrival": "closed",
                "concurrency": clients,
                "num_requests": waves * clients,
                "input": {"dist": "fixed", "mean": 512},
                "output": {"dist": "fixed", "mean": 128},
            },
        }
    )
    s = simulate(cfg, sm).summary
    assert m["ttft_s"] == pytest.approx(s.ttft.mean, rel=0.1)


def test_arrival_lag_adds_one_mean_step_to_later_waves():
    plain = closed_loop(64, 256, 1024, 128, 8192, 5)
    lagged = closed_loop(64, 256, 1024, 128, 8192, 5, arrival_lag=True)
    assert len(plain.shapes) == 3 and len(lagged.shapes) == 4  # + a spread prompt's own step
    a = plain.metrics([0.01, 0.05, 0.05])
    b = lagged.metrics(
        [0.01, 0.05, 0.05, 0.05]
    )  # the spread step timed like the group's: only the lag differs
    mean_step = a["request_latency_s"] / plain.steps
    assert b["ttft_s"] - a["ttft_s"] == pytest.approx(4 / 5 * mean_step)
    assert b["tpot_s"] == a["tpot_s"]
