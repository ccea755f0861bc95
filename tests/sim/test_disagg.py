"""Disaggregated prefill/decode: transfer bytes, TTFT cost, no prefill stalls in decode streams."""

from __future__ import annotations

import dataclasses
import json

import pytest

from infercast.cli import main
from infercast.cost.comm import kv_transfer_time_s
from infercast.sim import disagg
from infercast.sim.config import build_config
from infercast.sim.disagg import kv_transfer_bytes
from infercast.sim.presets import build_step_model
from infercast.sim.run import simulate

DISAGG = {
    "prefill": {"replicas": 1},
    "decode": {"replicas": 1},
    "transfer_latency_s": 0.002,
    "transfer_bandwidth_bytes_per_s": 2e10,
}


def _run(step_model, workload: dict, disagg: dict | None = None, **top):
    cfg = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "seed": 2, "workload": workload, **top}
    if disagg is not None:
        cfg["disaggregation"] = disagg
    records = []
    result = simulate(build_config(cfg), step_model, sink=records.append)
    return result, records


def test_transfer_bytes_are_the_prompts_kv(step_model):
    # the time to send them: tests/cost/test_comm.py (cost.comm.kv_transfer_time_s)
    nbytes = kv_transfer_bytes(step_model, 1000)
    assert nbytes == pytest.approx(1000 * step_model.model.kv_bytes_per_token(2))  # bf16 KV, TP 1


def test_ttft_grows_by_the_transfer_time(step_model):
    one = {"concurrency": 1, "num_requests": 1, "input": {"mean": 2000}, "output": {"mean": 16}}
    agg, _ = _run(step_model, one)
    dis, _ = _run(step_model, one, DISAGG)
    transfer = kv_transfer_time_s(kv_transfer_bytes(step_model, 2000), 2e10, 0.002)
    first_decode = step_model.step_time_s([1], [1999])  # the decode side emits the first token
    assert dis.summary.ttft.mean == pytest.approx(
        agg.summary.ttft.mean + transfer + first_decode, rel=1e-9
    )
    assert dis.extra["kv_transfer_s_mean"] == pytest.approx(transfer)
    assert dis.summary.tpot.mean == pytest.approx(agg.summary.tpot.mean, rel=0.01)


def test_removes_the_tpot_spikes_chunked_prefill_leaves(step_model):
    heavy = {"rate": 3.0, "num_requests": 150, "input": {"mean": 6000}, "output": {"mean": 100}}
    agg, _ = _run(step_model, heavy, replicas=2)  # same GPU count: 2 aggregated vs 1 + 1
    dis, _ = _run(step_model, heavy, DISAGG)
    assert agg.summary.completed == dis.summary.completed == 150
    assert dis.summary.itl.percentiles[99.0] < 0.3 * agg.summary.itl.percentiles[99.0]
    assert dis.summary.tpot.percentiles[99.0] < agg.summary.tpot.percentiles[99.0]
    assert dis.summary.ttft.mean > agg.summary.ttft.mean


def test_decode_admission_waits_for_kv(step_model):
    wl = {"rate": 50.0, "num_requests": 60, "input": {"mean": 1000}, "output": {"mean": 200}}
    small = {**DISAGG, "decode": {"replicas": 1, "max_num_seqs": 256}}
    res, recs = _run(step_model, wl, small, scheduler={"num_blocks": 400})  # 6,400 tokens of KV
    assert res.summary.completed == 60 and res.blocks_in_use_at_end == 0
    assert res.extra["decode_peak_kv_usage"] <= 1.0
    assert res.extra["decode_mean_batch_size"] <= 6400 / 1000


def test_cli_disaggregated_flags(capsys):
    main(
        [
            "simulate",
            "--disaggregated",
            "--prefill-replicas",
            "1",
            "--decode-replicas",
            "2",
            "--rate",
            "2",
            "--num-requests",
            "20",
            "--input-tokens",
            "512",
            "--output-tokens",
            "32",
            "--json",
        ]
    )
    d = json.loads(capsys.readouterr().out)
    assert d["disaggregated"] is True and d["num_gpus"] == 3 and d["num_completed"] == 20


def test_layer_overlap_hides_the_transfer_under_the_prefill(step_model):
    one = {"concurrency": 1, "num_requests": 1, "input": {"mean": 4000}, "output": {"mean": 8}}
    plain, _ = _run(step_model, one, DISAGG)
    overlap, _ = _run(step_model, one, {**DISAGG, "layer_overlap": True})
    wire = kv_transfer_bytes(step_model, 4000) / 2e10
    prefill = step_model.step_time_s([4000], [0])
    hidden = wire - max(wire - prefill * 31 / 32, wire / 32)
    assert overlap.summary.ttft.mean == pytest.approx(plain.summary.ttft.mean - hidden, rel=1e-9)
    assert hidden > 0


def test_windowed_decode_pool_is_compact_and_times_as_if_every_member_were_listed(monkeypatch):
    # gpt-oss (sliding window 128): the decode pool keeps its group compact, since DecodeTimer
    # sees contexts only by their sum; listing every member each step (the old pool) gives the
    # same records. Prompts from 40 tokens: some contexts start inside the window.
    cfg = build_config(
        {
            "model": "gpt-oss-20b",
            "hardware": "h100-sxm",
            "seed": 5,
            "workload": {
                "rate": 40.0,
                "num_requests": 120,
                "input": {"dist": "uniform", "mean": 300, "std": 150},
                "output": {"dist": "uniform", "mean": 120, "std": 60},
            },
            "disaggregation": DISAGG,
        }
    )
    sm = build_step_model(cfg)
    assert disagg.disagg_pools(cfg, sm).decode_sched.compact_decodes
    new_recs = []
    new_res = simulate(cfg, sm, sink=new_recs.append)
    pools = disagg.disagg_pools

    def listed(cfg, timer):
        p = pools(cfg, timer)
        return dataclasses.replace(
            p, decode_sched=dataclasses.replace(p.decode_sched, compact_decodes=False)
        )

    monkeypatch.setattr(disagg, "disagg_pools", listed)
    old_recs = []
    old_res = simulate(cfg, sm, sink=old_recs.append)
    assert len(new_recs) == 120

    def times(recs):
        return [(r.request_id, r.finish_s, r.output_tokens, list(r.chunk_times_s)) for r in recs]

    assert times(new_recs) == times(old_recs)  # every token time, exactly
    assert new_res.num_steps == old_res.num_steps
    assert new_res.summary.tpot.mean == old_res.summary.tpot.mean
