"""Disaggregated rows: what the source must state before a row is predicted, and what it implies."""

from __future__ import annotations

import json

import pytest

from infercast.validate.cases import read_cases
from infercast.validate.disagg import UNSTATED_WORKERS_NOTE
from infercast.validate.evaluate import Evaluator
from infercast.validate.profiles import ProfileSet

COLS = "id,scenario,metric,value,model,hardware,n_gpus,weights,engine,input_tokens,output_tokens,concurrency,extra\n"


def _row(rid: str, extra: dict, n_gpus: int = 2, concurrency: int = 16) -> str:
    cell = '"' + json.dumps(extra).replace('"', '""') + '"'
    return f"{rid},disaggregated,tpot_mean_s,0.01,llama-3.1-8b,h100-sxm,{n_gpus},bf16,vllm,1024,256,{concurrency},{cell}"


def _predict(*lines: str):
    cases = read_cases(COLS + "\n".join(lines) + "\n")
    return Evaluator(cases).predict(ProfileSet())


def test_unstated_worker_counts_are_assumed_and_marked():
    # InferenceX runs imported into aiconfigurator's sample drop num_workers; their recipes ran
    # xP/yD pools (e.g. 3 prefill + 4 decode workers at concurrency 4968): one of each is marked
    bare = {"prefill": {"tp_size": "1", "num_workers": ""}, "decode": {"tp_size": "1", "num_workers": ""}}
    stated = {"prefill": {"tp_size": "1", "num_workers": "1"}, "decode": {"tp_size": "1", "num_workers": "1"}}
    assumed, given, odd = _predict(_row("a-tpot", bare), _row("b-tpot", stated), _row("c-tpot", bare, n_gpus=3))
    assert assumed.predicted == pytest.approx(given.predicted)
    assert UNSTATED_WORKERS_NOTE in assumed.notes and UNSTATED_WORKERS_NOTE not in given.notes
    assert odd.predicted is None and "how many prefill and decode workers" in odd.skipped_reason
