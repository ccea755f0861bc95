"""Trace formats: ShareGPT JSON, Mooncake JSONL and Azure CSV, each from a small file in
tests/data/traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infercast.errors import DataError
from infercast.sim.trace_formats import approx_tokens
from infercast.sim.workload import load_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def test_sharegpt_lengths_from_text_and_no_times():
    tr = load_trace(DATA / "sharegpt_small.json")
    # 3 of the 4 conversations have a prompt and a reply; lengths are characters / 4 rounded up
    assert len(tr) == 3 and not tr.arrival_s.any()
    assert (
        tr.prompt_tokens[0]
        == approx_tokens("What is the capital of France? Answer in one word.")
        == 13
    )
    assert tr.output_tokens[0] == 2  # "Paris." is 6 characters


def test_mooncake_timestamps_are_milliseconds():
    tr = load_trace(DATA / "mooncake_small.jsonl")
    # sorted by arrival: 0, 27, 1500, 3000 ms
    assert np.allclose(tr.arrival_s, [0.0, 0.027, 1.5, 3.0])
    assert tr.prompt_tokens.tolist() == [6955, 1024, 2048, 512]
    assert tr.output_tokens.tolist() == [52, 128, 20, 400]


def test_azure_csv_date_times():
    tr = load_trace(DATA / "azure_small.csv")
    assert tr.prompt_tokens.tolist() == [374, 396, 879]
    assert tr.arrival_s[1] == pytest.approx(4.314579)


@pytest.mark.parametrize(
    "text, why",
    [
        ("[1, 2]", "row 1 is not a JSON object"),
        ('[{"conversations": [{"from": "human", "value": "hi"}]}]', "no ShareGPT conversation"),
        ('{"timestamp": 1, "input_length": 5}\n', "columns"),
        ("[{not json", "not valid JSON"),
    ],
)
def test_bad_json_traces_are_data_errors(tmp_path, text, why):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(DataError, match=why):
        load_trace(path)


def _simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "infercast.cli",
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--no-progress",
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
    )


def test_simulate_replays_a_trace_once_by_default():
    # A 4-row trace is 4 requests, not the 1,000 of the default request count.
    proc = _simulate("--trace", str(DATA / "mooncake_small.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["num_requests"] == 4


def test_simulate_with_a_sharegpt_file_is_no_traceback():
    proc = _simulate("--trace", str(DATA / "sharegpt_small.json"), "--request-rate", "2")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["num_completed"] == 3
