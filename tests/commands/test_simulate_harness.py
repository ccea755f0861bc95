"""``infercast simulate --harness``: the closed loop as a benchmark client runs it (sim.clients)."""

import json

import pytest

from infercast.cli import main

ARGS = [
    "simulate",
    "--engine",
    "vllm-0.12",
    "--input-tokens",
    "1000",
    "--output-tokens",
    "100",
    "--json",
    "--no-progress",
]


def _run(capsys, *extra):
    main([*ARGS, *extra])
    return json.loads(capsys.readouterr().out)


def test_inferencex_sends_ten_prompts_per_client_with_drawn_lengths(capsys):
    d = _run(capsys, "--max-concurrency", "8", "--harness", "inferencex")
    assert d["num_requests"] == 80  # --num-prompts $(( $CONC * 10 ))
    mean_prompt = d["total_input_tokens"] / d["completed"]
    assert 800 <= mean_prompt <= 1000 and mean_prompt != 1000  # randint(int(0.8 L), L + 1)
    # drawn lengths break the lockstep of identical clients: later prompts no longer share one step
    fixed = _run(capsys, "--max-concurrency", "8", "--num-prompts", "80")
    assert d["ttft_s"]["p50"] < fixed["ttft_s"]["p50"]


def test_the_user_s_request_count_wins(capsys):
    assert (
        _run(capsys, "--max-concurrency", "4", "--harness", "inferencex", "--num-prompts", "12")[
            "num_requests"
        ]
        == 12
    )


def test_a_harness_needs_a_concurrency(capsys):
    with pytest.raises(SystemExit) as exc:
        main([*ARGS, "--harness", "inferencex"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-concurrency" in err[0]


def test_an_unknown_harness_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main([*ARGS, "--max-concurrency", "4", "--harness", "wrk"])
    assert exc.value.code == 2
    assert "unknown harness 'wrk'" in capsys.readouterr().err
