"""Speculative decoding in the simulator: sampled tokens per step, speedup vs batch, acceptance
0."""

from __future__ import annotations

import json

import numpy as np
import pytest

from infercast.cli import main
from infercast.cost.speculative import expected_tokens
from infercast.sim.config import build_config
from infercast.sim.run import simulate
from infercast.sim.speculative import draw_acceptance, draw_tokens


def _run(
    step_model, concurrency: int, spec: dict | None, num: int | None = None, output: int = 128
):
    cfg = {
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "mode": "exact",
        "seed": 3,
        "workload": {
            "concurrency": concurrency,
            "num_requests": num or 2 * concurrency,
            "input": {"mean": 256},
            "output": {"mean": output},
        },
    }
    if spec is not None:
        cfg["speculative"] = spec
    records = []
    result = simulate(build_config(cfg), step_model, sink=records.append)
    return result, records


@pytest.mark.parametrize(("a", "k"), [(0.0, 3), (0.5, 3), (0.8, 5), (0.95, 2), (1.0, 4)])
def test_tokens_per_verify_step_average_the_formula(a, k):
    rng = np.random.default_rng(0)
    draws = np.array([draw_tokens(rng, a, k) for _ in range(20000)])
    assert draws.min() >= 1 and draws.max() <= k + 1
    assert draws.mean() == pytest.approx(expected_tokens(a, k), rel=0.02)


def test_acceptance_draws_have_the_asked_mean_and_spread():
    rng = np.random.default_rng(1)
    a = np.array([draw_acceptance(rng, 0.7, 0.1) for _ in range(20000)])
    assert a.mean() == pytest.approx(0.7, abs=0.005) and a.std() == pytest.approx(0.1, abs=0.005)
    assert draw_acceptance(rng, 0.7, 0.0) == 0.7


def test_simulated_tokens_per_step_match_the_expectation(step_model):
    spec = {"num_speculative_tokens": 3, "acceptance": 0.7}
    _, records = _run(step_model, 4, spec, num=16, output=400)
    chunks = [
        c for r in records for c in r.chunk_tokens[1:]
    ]  # the first token comes from the prefill
    assert sum(r.output_tokens for r in records) == 16 * 400
    assert np.mean(chunks) == pytest.approx(expected_tokens(0.7, 3), rel=0.05)


def test_speedup_above_one_at_batch_one_and_shrinks_with_batch(step_model):
    spec = {"num_speculative_tokens": 3, "acceptance": 0.8, "acceptance_std": 0.1}
    speedups = []
    for conc in (1, 128):
        plain, _ = _run(step_model, conc, None)
        fast, _ = _run(step_model, conc, spec)
        speedups.append(fast.summary.output_throughput_tps / plain.summary.output_throughput_tps)
    assert speedups[0] > 1.8  # memory-bound: verifying 4 tokens costs about what 1 does
    assert speedups[1] < speedups[0] - 0.4  # wider verify steps turn compute-bound


def test_zero_acceptance_gives_no_gain_and_costs_the_draft(step_model):
    plain, _ = _run(step_model, 1, None, num=3)
    spec, records = _run(step_model, 1, {"num_speculative_tokens": 3, "acceptance": 0.0}, num=3)
    assert all(set(r.chunk_tokens) == {1} for r in records)
    assert spec.summary.tpot.mean > plain.summary.tpot.mean * 1.02


def test_per_request_acceptance_spreads_tpot(step_model):
    narrow, _ = _run(step_model, 8, {"acceptance": 0.7}, num=32)
    wide, _ = _run(step_model, 8, {"acceptance": 0.7, "acceptance_std": 0.2}, num=32)
    spread = [r.summary.tpot.std for r in (narrow, wide)]
    assert spread[1] > 1.5 * spread[0]


def test_cli_speculative_flags(capsys):
    main(
        [
            "simulate",
            "--speculative",
            "eagle",
            "--num-speculative-tokens",
            "2",
            "--acceptance",
            "0.6",
            "--concurrency",
            "2",
            "--num-requests",
            "4",
            "--output-tokens",
            "32",
            "--input-tokens",
            "64",
            "--json",
        ]
    )
    d = json.loads(capsys.readouterr().out)
    assert d["num_completed"] == 4 and d["speculative_tokens_per_step_expected"] == pytest.approx(
        1 + 0.6 + 0.36
    )
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--speculative", "draft", "--concurrency", "2"])
    assert exc.value.code == 2 and "draft_model" in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["chunked", "continuous", "static"])
def test_conservation_under_kv_pressure(step_model, policy):
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "seed": 5,
            "mode": "exact",
            "scheduler": {
                "policy": policy,
                "num_blocks": 60,
                "max_num_seqs": 16,
                "max_num_batched_tokens": 512,
            },
            "workload": {
                "rate": 30,
                "num_requests": 120,
                "input": {"mean": 200, "dist": "uniform", "std": 50},
                "output": {"mean": 100, "dist": "uniform", "std": 50},
            },
            "speculative": {"acceptance": 0.7, "acceptance_std": 0.15, "num_speculative_tokens": 4},
        }
    )
    records = []
    result = simulate(cfg, step_model, sink=records.append)
    assert result.summary.completed == 120 and result.blocks_in_use_at_end == 0
    assert policy == "static" or result.num_preemptions > 0  # recompute happened and recovered
    assert all(sum(r.chunk_tokens) == r.output_tokens and max(r.chunk_tokens) <= 5 for r in records)
