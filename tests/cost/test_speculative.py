"""Speculative decoding cost: the expected-tokens formula and how the gain moves with batch."""

from __future__ import annotations

import numpy as np
import pytest

from infercast.cost.speculative import (
    SpeculativeConfig,
    SpeculativeModel,
    acceptance_from_tau,
    expected_tokens,
    mean_expected_tokens,
)
from infercast.cost.step import StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision


@pytest.fixture(scope="module")
def target():
    return StepModel(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision.parse("bf16"))


def test_expected_tokens_formula():
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.8, 3) == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    # Monte Carlo of i.i.d. acceptance: stop at the first rejection, +1 bonus token.
    rng = np.random.default_rng(0)
    draws = rng.random((200_000, 3)) < 0.8
    accepted = np.where(draws.all(axis=1), 3, draws.argmin(axis=1)) + 1
    assert accepted.mean() == pytest.approx(expected_tokens(0.8, 3), rel=0.01)


def test_spread_raises_mean_tokens_convexity():
    point = expected_tokens(0.8, 6)
    spread = mean_expected_tokens(0.8, 0.1, 6)
    assert spread > point
    assert mean_expected_tokens(0.8, 0.0, 6) == pytest.approx(point)


def test_tau_inversion():
    a = acceptance_from_tau(3.5, 5)
    assert expected_tokens(a, 5) == pytest.approx(3.5, rel=1e-9)
    with pytest.raises(ConfigError):
        acceptance_from_tau(7.0, 5)


def test_gain_at_batch_1_shrinks_with_batch(target):
    spec = SpeculativeModel(target, SpeculativeConfig("eagle", 3, 0.85))
    # short context: weights and compute dominate (at long context a KV-bound batch still gains,
    # since one KV read serves all k + 1 verified tokens)
    small, large = spec.step(1, 128), spec.step(512, 128)
    assert small.speedup > 1.5
    assert large.speedup < small.speedup
    assert large.speedup < 1.3


def test_zero_acceptance_costs_the_draft(target):
    spec = SpeculativeModel(target, SpeculativeConfig("eagle", 3, 0.0))
    step = spec.step(1, 1024)
    assert step.tokens_per_step == 1.0
    assert step.speedup < 1.0
    assert step.tpot_s == pytest.approx(step.draft_s + step.verify_s)


def test_separate_draft_model(target):
    draft = StepModel(
        load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision.parse("int4")
    )
    spec = SpeculativeModel(target, SpeculativeConfig("draft", 4, 0.7), draft)
    assert spec.step(1, 512).draft_s > 0
    with pytest.raises(ConfigError, match="`draft_model`"):
        SpeculativeModel(target, SpeculativeConfig("draft", 4, 0.7))
