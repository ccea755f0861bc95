"""Disaggregated rows: what the source must state before a row is predicted, and what it implies."""

from __future__ import annotations

import json

import pytest

from infercast.closedform.disagg import (
    UNSTATED_WORKERS_NOTE,
    decode_running_limit,
    disagg_loop,
    prefill_seats,
)
from infercast.cost.profiles import ProfileSet
from infercast.validate.cases import read_cases
from infercast.validate.evaluate import Evaluator

COLS = (
    "id,scenario,metric,value,model,hardware,n_gpus,weights,engine,input_tokens,output_tokens,"
    "concurrency,extra\n"
)


def _row(
    rid: str,
    extra: dict,
    n_gpus: int = 2,
    concurrency: int = 16,
    metric: str = "tpot_mean_s",
    lengths: tuple[int, int] = (1024, 256),
) -> str:
    cell = '"' + json.dumps(extra).replace('"', '""') + '"'
    i, o = lengths
    return (
        f"{rid},disaggregated,{metric},0.01,llama-3.1-8b,h100-sxm,{n_gpus},bf16,vllm,{i},{o},"
        f"{concurrency},{cell}"
    )


def _predict(*lines: str):
    cases = read_cases(COLS + "\n".join(lines) + "\n")
    return Evaluator(cases).predict(ProfileSet())


def test_unstated_worker_counts_are_assumed_and_marked():
    # InferenceX runs imported into aiconfigurator's sample drop num_workers; their recipes ran
    # xP/yD pools (e.g. 3 prefill + 4 decode workers at concurrency 4968): one of each is marked
    bare = {
        "prefill": {"tp_size": "1", "num_workers": ""},
        "decode": {"tp_size": "1", "num_workers": ""},
    }
    stated = {
        "prefill": {"tp_size": "1", "num_workers": "1"},
        "decode": {"tp_size": "1", "num_workers": "1"},
    }
    assumed, given, odd = _predict(
        _row("a-tpot", bare), _row("b-tpot", stated), _row("c-tpot", bare, n_gpus=3)
    )
    assert assumed.predicted == pytest.approx(given.predicted)
    assert UNSTATED_WORKERS_NOTE in assumed.notes and UNSTATED_WORKERS_NOTE not in given.notes
    assert odd.predicted is None and "how many prefill and decode workers" in odd.skipped_reason


def test_stated_decode_batch_raises_the_running_limit_within_the_kv():
    # 32 attention-DP ranks x 256 sequences: the engine default (2,048) would queue three quarters
    dep32 = {"batch_size": "256", "attention_dp_size": "32", "num_workers": "1"}
    assert decode_running_limit(2048, dep32, kv_fit=1_000_000) == 8192
    assert decode_running_limit(2048, dep32, kv_fit=5000) == 5000  # never beyond the KV that fits
    assert (
        decode_running_limit(2048, {"batch_size": "64"}, kv_fit=10_000) == 2048
    )  # never below the default
    assert decode_running_limit(2048, {"batch_size": ""}, kv_fit=10_000) == 2048


def test_deep_decode_pool_runs_its_stated_batch_without_a_queue():
    # 1 decode worker of 8 ranks x 512 sequences, 4,096 clients of 128-token prompts (cheap
    # prefill): with the engine default (1,024 for vLLM) three quarters of the clients wait for a
    # decode seat
    def rows(batch: str) -> list[str]:
        layout = {
            "prefill": {"tp_size": "1", "num_workers": "4"},
            "decode": {
                "tp_size": "1",
                "attention_dp_size": "8",
                "batch_size": batch,
                "num_workers": "1",
            },
        }
        return [
            _row(f"{batch or 'x'}-{m}", layout, 12, 4096, m, (128, 256))
            for m in ("ttft_mean_s", "tpot_mean_s")
        ]

    stated_ttft, _, bare_ttft, bare_tpot = _predict(*rows("512"), *rows(""))
    assert (
        bare_ttft.predicted > 256 * bare_tpot.predicted
    )  # queued: waits more than a request's stay
    assert stated_ttft.predicted < 0.1 * bare_ttft.predicted


def _shipped_tpot_rows():
    from infercast.validate.cases import load_cases

    return [c for c in load_cases() if c.scenario == "disaggregated" and c.metric == "tpot_mean_s"]


def test_shipped_rows_with_a_batch_have_concurrency_workers_ranks_batch():
    # the identity behind decode_running_limit: the stated batch is per attention-DP rank. On
    # aiconfigurator's own runs; the InferenceX runs whose layout comes from a recipe
    # (extra.layout_source) state the recipe's decode max_batch_size per rank, which InferenceX
    # sweeps past (e.g. 563 clients on 32 ranks of 16)
    checked = 0
    for c in _shipped_tpot_rows():
        d = c.extra["decode"]
        if "layout_source" in c.extra:
            continue
        if d.get("batch_size") and d.get("num_workers") and c.concurrency:
            ranks = int(d.get("attention_dp_size") or 1)
            assert c.concurrency == int(d["num_workers"]) * ranks * int(d["batch_size"]), c.id
            checked += 1
    assert checked >= 60


def test_shipped_rows_without_workers_do_not_determine_their_run():
    # identical columns, TPOTs up to 2.5x apart (InferenceX runs with and without MTP or with other
    # worker counts): why such rows are marked rather than trusted; rows with workers never collide
    groups: dict[tuple, list[float]] = {}
    for c in _shipped_tpot_rows():
        key = (
            c.hardware,
            c.engine,
            c.weights,
            c.input_tokens,
            c.output_tokens,
            c.concurrency,
            json.dumps(c.extra, sort_keys=True),
        )
        groups.setdefault(key, []).append(c.value)
    apart = [k for k, v in groups.items() if max(v) > 1.5 * min(v)]
    assert len(apart) >= 20
    assert all(not json.loads(k[-1])["decode"].get("num_workers") for k in apart)


def test_prefill_worker_takes_its_stated_batch_per_rank():
    # aiconfigurator deploys prefill engines with max_batch_size = batch_size (1 on every shipped
    # row), per attention-DP rank, each rank with its own token budget
    assert prefill_seats({"batch_size": "1"}, ranks=4, default=2048) == 4
    assert prefill_seats({"batch_size": ""}, ranks=4, default=2048) == 2048
    tp = disagg_loop(
        64, (1, 1), 1024, 128, 8192, prefill_seats({"batch_size": "1"}, 1, 2048), 512, 0.0
    )
    dp = disagg_loop(
        64,
        (1, 1),
        8192,
        128,
        8192,
        prefill_seats({"batch_size": "1"}, 4, 2048),
        512,
        0.0,
        prefill_ranks=4,
    )
    assert tp.prefill_shapes == (
        ((1, 1024, 0),),
    )  # one 1k prompt per step, not the 8 a budget would hold
    assert dp.prefill_shapes == (
        ((4, 8192, 0),),
    )  # one 8k prompt per rank, each within its own budget


def test_ttft_includes_the_serving_stack_overhead_tpot_does_not():
    # the same benchmark client (AIPerf through the Dynamo frontend) as the concurrency rows: the
    # profile's fitted request_overhead_s, held out (disaggregated rows are not fitted)
    from infercast.cost.efficiency import EfficiencyProfile

    layout = {
        "prefill": {"tp_size": "1", "num_workers": "1"},
        "decode": {"tp_size": "1", "num_workers": "1"},
    }
    lines = [_row(f"r-{m}", layout, metric=m) for m in ("ttft_mean_s", "tpot_mean_s")]
    cases = read_cases(COLS + "\n".join(lines) + "\n")
    plain = Evaluator(cases).predict(ProfileSet())
    stack = Evaluator(cases).predict(ProfileSet(EfficiencyProfile(request_overhead_s=0.25)))
    assert stack[0].predicted == pytest.approx(plain[0].predicted + 0.25)
    assert stack[1].predicted == pytest.approx(plain[1].predicted)


def test_simulator_runs_the_stated_layout_too():
    # --simulate-all: the simulator's pools get the same stated decode batch and prefill seats as
    # the closed form (before, its decode pool kept the engine default and queued three quarters)
    layout = {
        "prefill": {"tp_size": "1", "num_workers": "4", "batch_size": "1"},
        "decode": {
            "tp_size": "1",
            "attention_dp_size": "8",
            "batch_size": "512",
            "num_workers": "1",
        },
    }
    lines = [_row(f"s-{m}", layout, 12, 4096, m, (128, 64)) for m in ("ttft_mean_s", "tpot_mean_s")]
    cases = read_cases(COLS + "\n".join(lines) + "\n")
    closed = Evaluator(cases).predict(ProfileSet())
    sim = Evaluator(cases, prefer_simulator=True).predict(ProfileSet())
    for a, b in zip(closed, sim, strict=True):
        assert b.predicted == pytest.approx(a.predicted, rel=0.15), a.case.id
