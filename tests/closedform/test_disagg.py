"""The disaggregated closed form agrees with the simulator's prefill/decode pools on the same
rows."""

from __future__ import annotations

import json

import pytest

from infercast.closedform.disagg import disagg_loop
from infercast.cost.profiles import ProfileSet
from infercast.validate.cases import read_cases
from infercast.validate.evaluate import Evaluator

COLS = (
    "id,scenario,metric,value,model,hardware,n_gpus,weights,engine,input_tokens,output_tokens,"
    "concurrency,extra\n"
)


def _extra(pw: int, dw: int, tp_p: int = 1, tp_d: int = 1) -> str:
    e = {
        "prefill": {"num_workers": pw, "tp_size": tp_p},
        "decode": {"num_workers": dw, "tp_size": tp_d},
    }
    return '"' + json.dumps(e).replace('"', '""') + '"'


ROWS = [  # (concurrency, input, output, prefill workers, decode workers)
    (1, 1024, 128, 1, 1),
    (16, 1024, 256, 1, 1),
    (64, 2048, 256, 1, 2),
    (96, 8192, 512, 2, 1),
    (256, 512, 128, 1, 1),
]


def _cases():
    lines = []
    for k, (c, i, o, pw, dw) in enumerate(ROWS):
        for m in ("ttft_mean_s", "tpot_mean_s"):
            lines.append(
                f"r{k}-{m},disaggregated,{m},1,llama-3.1-8b,h100-sxm,{pw + dw},bf16,vllm,{i},{o},"
                f"{c},{_extra(pw, dw)}"
            )
    cases = read_cases(COLS + "\n".join(lines) + "\n")
    assert all(c.problem is None for c in cases)
    return cases


def test_closed_form_matches_the_simulator():
    cases, prof = _cases(), ProfileSet()
    closed = Evaluator(cases).predict(prof)
    sim = Evaluator(cases, prefer_simulator=True).predict(prof)
    for a, b in zip(closed, sim, strict=True):
        assert a.predicted and b.predicted, (a.skipped_reason, b.skipped_reason)
        tol = (
            0.13 if a.case.metric == "ttft_mean_s" else 0.06
        )  # near a saturated prefill pool later waves collide a little
        assert a.predicted == pytest.approx(b.predicted, rel=tol), a.case.id


def test_one_client_is_prefill_transfer_decode():
    loop = disagg_loop(1, (1, 1), 1024, 128, 8192, 1024, 512, transfer_s=0.003, waves=3)
    assert loop.prefill_shapes == (((1, 1024, 0),),) and loop.decode_shapes == (
        ((1, 1, 1024 + 64),),
    )
    m = loop.metrics([0.05], [0.01])
    assert m["ttft_s"] == pytest.approx(0.05 + 0.003 + 0.01)
    assert m["tpot_s"] == pytest.approx(0.01)
    assert m["requests_per_s"] == pytest.approx(1 / (0.05 + 0.003 + 128 * 0.01), rel=1e-6)


def test_prefill_bound_pool_queues_the_rest():
    # one prefill worker, 1000 clients, 4k prompts (2 per step of 1 s): at most 2 prompts/s
    loop = disagg_loop(1000, (1, 4), 4096, 100, 8192, 1024, 1024, transfer_s=0.0, waves=None)
    m = loop.metrics([1.0], [0.02] * len(loop.decode_shapes))
    assert m["requests_per_s"] == pytest.approx(2.0, rel=0.01)
    assert m["ttft_s"] == pytest.approx(
        1000 / 2.0 - 100 * 0.02, rel=0.02
    )  # Little: C / X less the decode stay
