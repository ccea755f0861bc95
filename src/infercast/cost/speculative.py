"""Speculative decoding in the cost model: draft k tokens, verify them in one target step.

Expected tokens emitted per verify step, with i.i.d. per-token acceptance a and k
drafted tokens (Leviathan et al. 2023, eq. 1):

    E(a, k) = (1 - a^(k+1)) / (1 - a)        (k + 1 when a = 1; 1 when a = 0)

It counts the target's bonus token, so it equals the "acceptance length" tau that
EAGLE papers report. Acceptance differs across requests (prompts, domains): here
a ~ Beta with the given mean and standard deviation, and E is averaged over it
(Gauss-Legendre quadrature on the Beta density): E is convex in a, so the mean
acceptance alone understates the tokens per step (Jensen), more so for large k.

Cost of one speculative step of a batch of b sequences at context c:
- draft: k sequential decode steps of the drafter at batch b (a separate small
  model, or an EAGLE/MTP head: the target's first layer(s) and its LM head),
  run inside the same engine step, so the per-step overhead is charged once;
- verify: one target step computing ``verify_tokens`` new tokens per sequence
  (k + 1 for a chain; the tree size for tree drafting) on top of c cached.
Time per output token = (draft + verify) / E, so the gain shrinks as the batch
grows and the verify step, k + 1 times wider, turns compute-bound.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from scipy import stats

from infercast.cost.step import StepModel
from infercast.errors import ConfigError
from infercast.specs.model import ModelSpec

METHODS = ("draft", "eagle", "mtp")


def expected_tokens(a: float | np.ndarray, k: int) -> float | np.ndarray:
    """E(a, k) = (1 - a^(k+1)) / (1 - a), tokens emitted per verify step."""
    a = np.asarray(a, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(np.isclose(a, 1.0), k + 1.0, (1.0 - a ** (k + 1)) / (1.0 - a))
    return float(e) if e.ndim == 0 else e


def acceptance_from_tau(tau: float, k: int) -> float:
    """The i.i.d. acceptance a whose E(a, k) equals a measured acceptance length tau."""
    if not 1.0 <= tau <= k + 1:
        raise ConfigError(f"acceptance length {tau} must lie in [1, k + 1 = {k + 1}]")
    lo, hi = 0.0, 1.0
    for _ in range(60):  # bisection: E is increasing in a
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens(mid, k) < tau else (lo, mid)
    return (lo + hi) / 2


def beta_params(mean: float, std: float) -> tuple[float, float]:
    """Beta(alpha, beta) with the given mean and standard deviation."""
    var = std * std
    if var <= 0 or var >= mean * (1 - mean):
        raise ConfigError(
            f"acceptance spread {std} must be in (0, sqrt(mean*(1-mean)) = "
            f"{np.sqrt(mean * (1 - mean)):.3f})"
        )
    common = mean * (1 - mean) / var - 1
    return mean * common, (1 - mean) * common


def mean_expected_tokens(mean: float, std: float, k: int) -> float:
    """E(a, k) averaged over a ~ Beta(mean, std) (std 0: the point value)."""
    if std <= 0 or mean in (0.0, 1.0):
        return float(expected_tokens(mean, k))
    alpha, beta = beta_params(mean, std)
    x, w = np.polynomial.legendre.leggauss(64)
    a = (x + 1) / 2
    density = stats.beta.pdf(a, alpha, beta)
    return float(np.sum(w / 2 * density * expected_tokens(a, k)) / np.sum(w / 2 * density))


@dataclass(frozen=True)
class SpeculativeConfig:
    """How drafts are made and verified.

    ``acceptance`` is the mean per-token acceptance rate, ``acceptance_std`` its
    spread across requests. ``verify_tokens`` defaults to k + 1 (a chain);
    tree drafting verifies more tokens than it can accept.
    """

    method: str = "eagle"
    num_speculative_tokens: int = 3
    acceptance: float = 0.8
    acceptance_std: float = 0.0
    draft_layers: int = 1  # eagle / mtp head depth, in target-shaped layers
    verify_tokens: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(
                f"speculative method {self.method!r}: use one of {', '.join(METHODS)}"
            )
        if self.num_speculative_tokens < 1:
            raise ConfigError(
                f"`num_speculative_tokens` must be >= 1, got {self.num_speculative_tokens}"
            )
        if not 0.0 <= self.acceptance <= 1.0:
            raise ConfigError(f"`acceptance` must be in [0, 1], got {self.acceptance}")
        if self.verify_tokens and self.verify_tokens < self.num_speculative_tokens + 1:
            raise ConfigError("verify_tokens must be at least num_speculative_tokens + 1")

    @property
    def k(self) -> int:
        return self.num_speculative_tokens

    @property
    def width(self) -> int:
        """New tokens per sequence in the verify step."""
        return self.verify_tokens or self.k + 1

    @cached_property
    def tokens_per_step(self) -> float:
        """Expected tokens emitted per sequence per verify step."""
        return mean_expected_tokens(self.acceptance, self.acceptance_std, self.k)


def head_model(target: ModelSpec, layers: int) -> ModelSpec:
    """An EAGLE / MTP head: ``layers`` target-shaped decoder layers plus the target's LM head."""
    return replace(target, name=f"{target.name}-head{layers}", layers=target.layers[:layers])


@dataclass(frozen=True)
class SpecStep:
    """Times of one speculative step of a batch, and what it yields."""

    draft_s: float
    verify_s: float
    plain_s: float  # a normal decode step of the same batch, for comparison
    tokens_per_step: float

    @property
    def step_s(self) -> float:
        return self.draft_s + self.verify_s

    @property
    def tpot_s(self) -> float:
        """Time per output token of each sequence."""
        return self.step_s / self.tokens_per_step

    @property
    def speedup(self) -> float:
        """Plain decode time per token / speculative time per token (> 1 is a gain)."""
        return self.plain_s / self.tpot_s


class SpeculativeModel:
    """Costs speculative decoding for a target ``StepModel`` (and a drafter StepModel for
    ``draft``)."""

    def __init__(
        self, target: StepModel, config: SpeculativeConfig, draft: StepModel | None = None
    ):
        self.target, self.config = target, config
        if config.method == "draft":
            if draft is None:
                raise ConfigError("speculative method 'draft' needs --draft-model")
            self.drafter = draft
        else:
            head = head_model(target.model, config.draft_layers)
            self.drafter = StepModel(
                head, target.hardware, target.precision, target.parallel, target.profile
            )

    def step(self, batch: int, context: int) -> SpecStep:
        """One draft + verify step of ``batch`` sequences at ``context`` tokens."""
        c = self.config
        cached = max(context - 1, 0)
        overhead = self.drafter.profile.step_overhead_s  # charged once, with the verify step
        draft = sum(
            self.drafter.step_time_s([1] * batch, [cached + i] * batch) - overhead
            for i in range(c.k)
        )
        verify = self.target.step_time_s([c.width] * batch, [cached] * batch)
        plain = self.target.step_time_s([1] * batch, [cached] * batch)
        return SpecStep(draft, verify, plain, c.tokens_per_step)
