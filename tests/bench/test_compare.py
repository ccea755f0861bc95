"""--compare-sim: the simulator gets the bench run's workload, and the two summaries line up."""

import math

import pytest

from infercast.bench.compare import SimTarget, comparison, run_sim, sim_config_dict
from infercast.bench.run import BenchConfig
from infercast.errors import ConfigError
from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import summarize


def cfg(**kw):
    return BenchConfig(model="m", num_requests=50, input_tokens=100, output_tokens=20, **kw)


def test_workload_mapping():
    w = sim_config_dict(cfg(request_rate=4.0, burstiness=0.25), "llama-3.1-8b", "h100-sxm", "bf16")[
        "workload"
    ]
    assert (w["arrival"], w["rate"], w["cv"], w["num_requests"]) == ("gamma", 4.0, 2.0, 50)
    assert w["input"] == {"dist": "fixed", "mean": 100} and w["output"] == {
        "dist": "fixed",
        "mean": 20,
    }
    w = sim_config_dict(cfg(concurrency=8, range_ratio=0.3), "x", "y", "bf16")["workload"]
    assert (w["arrival"], w["concurrency"]) == ("closed", 8)
    assert w["input"]["dist"] == "uniform" and w["input"]["std"] == pytest.approx(
        100 * 0.3 / math.sqrt(3)
    )
    w = sim_config_dict(cfg(dataset="azure-code"), "x", "y", "bf16")["workload"]
    assert (w["arrival"], w["trace"]) == ("trace", "azure-code") and "input" not in w
    with pytest.raises(ConfigError):
        sim_config_dict(cfg(request_rate=1.0, concurrency=2), "x", "y", "bf16")


def test_simulated_summary_compares_row_by_row():
    predicted = run_sim(cfg(request_rate=2.0), SimTarget("llama-3.1-8b", "h100-sxm"))
    assert predicted.completed == 50 and predicted.total_output_tokens == 50 * 20
    measured = summarize(
        [
            RequestRecord(
                str(i),
                0.0,
                100,
                20,
                [0.1 + 0.01 * j for j in range(20)],
                finish_s=0.29,
                finish_reason="length",
            )
            for i in range(3)
        ]
    )
    rows = {r["metric"]: r for r in comparison(measured, predicted)}
    assert rows["TTFT mean (ms)"]["measured"] == pytest.approx(100.0)
    assert rows["TPOT mean (ms)"]["predicted"] == pytest.approx(predicted.tpot.mean * 1e3)
    assert rows["TPOT mean (ms)"]["predicted_over_measured"] == pytest.approx(
        predicted.tpot.mean / 0.01
    )
