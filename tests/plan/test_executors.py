"""The Ray executor returns the same plan as the local process pool (local Ray, 2 CPUs)."""

from __future__ import annotations

import pytest

from infercast.plan import PlanRequest, plan

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_and_process_pool_give_the_same_plan(local_ray, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    req = PlanRequest(
        model="llama-3.1-8b",
        hardware=("h100-sxm", "b200"),
        rate=2.0,
        input_tokens=512,
        output_tokens=64,
        slo_ttft_p99_s=1.0,
        slo_tpot_p99_s=0.03,
        num_requests=40,
        tps=(1, 2),
        precisions=(("bf16", "bf16"), ("fp8", "fp8")),
        batch_caps=(64, 256),
        chunks=(8192,),
        disagg_ratios=((1, 1),),
        top_k=2,
    )
    local = plan(req, executor="local", workers=2).to_dict()
    remote = plan(req, executor="ray").to_dict()
    assert remote["executor"] == "ray" and local["executor"] == "local"
    assert remote["num_simulations"] == local["num_simulations"] > 8
    assert remote["best"] == local["best"] and remote["alternatives"] == local["alternatives"]
