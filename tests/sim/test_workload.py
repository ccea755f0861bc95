"""Traces, length distributions and arrival processes."""

import json

import numpy as np
import pytest

from infercast.errors import ConfigError, DataError
from infercast.sim.workload import WorkloadSpec, load_trace, request_stream, sample_lengths


def test_shipped_traces_match_their_readme():
    conv, code = load_trace("azure-conv"), load_trace("azure-code")
    assert len(conv) == 19366 and len(code) == 8819
    assert conv.prompt_tokens.mean() == pytest.approx(1155, rel=0.01)
    assert conv.output_tokens.mean() == pytest.approx(211, rel=0.01)
    assert code.output_tokens.mean() == pytest.approx(28, rel=0.02)
    assert conv.arrival_s[0] == 0 and np.all(np.diff(conv.arrival_s) >= 0)


def test_azure_original_columns_csv_and_jsonl(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:46.6805900,374,44\n"
    )
    tr = load_trace(csv)
    assert tr.arrival_s.tolist() == pytest.approx([0.0, 4.314579])
    assert tr.prompt_tokens.tolist() == [374, 396]  # sorted by arrival
    jl = tmp_path / "t.jsonl"
    jl.write_text(
        "\n".join(
            json.dumps({"arrival_s": t, "prompt_tokens": 10, "output_tokens": 5})
            for t in (1.5, 2.5)
        )
        + "\n"
    )
    assert load_trace(jl).arrival_s.tolist() == [0.0, 1.0]


def test_bad_traces_fail_with_one_line(tmp_path):
    with pytest.raises(ConfigError, match="not a shipped trace"):
        load_trace("nope")


HEADER = "arrival_s,prompt_tokens,output_tokens\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time,in,out\n1,2,3\n", "columns"),
        (HEADER + "1,0,3\n", "row 1"),
        (HEADER + "1,2,3\n2,5\n", "fewer fields"),
        (HEADER + "1,2,x\n", "integers"),
    ],
)
def test_bad_csv_traces_name_the_problem(tmp_path, text, message):
    bad = tmp_path / "b.csv"
    bad.write_text(text)
    with pytest.raises(DataError, match=message):
        load_trace(bad)


def test_csv_columns_in_any_order_blank_lines_skipped(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("output_tokens,arrival_s,prompt_tokens,extra\n7,2.5,30,a\n\n5,1.25,20.0,b\n")
    tr = load_trace(f)
    assert tr.arrival_s.tolist() == [0.0, 1.25]
    assert tr.prompt_tokens.tolist() == [20, 30] and tr.output_tokens.tolist() == [5, 7]
    assert tr.prompt_tokens.dtype == np.int64


def test_trace_replay_then_sampling_with_replacement(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,20,2\n3,30,3\n")
    tr = load_trace(f)
    spec = WorkloadSpec("trace", 10, input_dist="trace", output_dist="trace")
    items = list(request_stream(spec, np.random.default_rng(0), tr))
    assert [i[0] for i in items[:3]] == [0.0, 1.0, 3.0] and [i[1] for i in items[:3]] == [
        10,
        20,
        30,
    ]
    assert len(items) == 10 and {i[1] for i in items[3:]} <= {10, 20, 30}
    assert all(b[0] >= a[0] for a, b in zip(items, items[1:], strict=False))
    again = list(request_stream(spec, np.random.default_rng(0), tr))
    assert again == items  # seeded


def test_arrival_processes_have_the_asked_rate_and_burstiness():
    rng = np.random.default_rng(1)
    for arrival, cv in (("poisson", 1.0), ("gamma", 3.0)):
        items = np.array(list(request_stream(WorkloadSpec(arrival, 20000, rate=5.0, cv=cv), rng)))
        gaps = np.diff(items[:, 0])
        assert gaps.mean() == pytest.approx(0.2, rel=0.05)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.1)
    off = list(request_stream(WorkloadSpec("offline", 5), rng))
    assert [i[0] for i in off] == [0.0] * 5
    closed = list(request_stream(WorkloadSpec("closed", 3), rng))
    assert all(np.isnan(i[0]) for i in closed)


@pytest.mark.parametrize("dist", ["uniform", "normal", "lognormal"])
def test_length_distributions_have_the_asked_mean_and_std(dist):
    x = sample_lengths(dist, 1000.0, 300.0, 1, None, np.random.default_rng(2), 50000)
    assert x.mean() == pytest.approx(1000, rel=0.02) and x.std() == pytest.approx(300, rel=0.05)
    assert x.min() >= 1


def test_shared_prefix_groups_add_prefix_tokens():
    spec = WorkloadSpec("offline", 100, input_mean=50, prefix_groups=3, prefix_tokens=200)
    items = list(request_stream(spec, np.random.default_rng(0)))
    assert {i[1] for i in items} == {250} and {i[3] for i in items} == {0, 1, 2}
