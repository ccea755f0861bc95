"""Sampling parameters and the sampler: greedy, temperature, top-k, top-p, seeds.

Top-p is nucleus sampling (Holtzman et al. 2020): keep the smallest set of
most likely tokens whose probability sums to at least p. Temperature 0 means
greedy (argmax), as in the OpenAI API. Each request owns a ``numpy`` Generator
(seeded from its ``seed``, else from the engine's generator), so a seeded
request samples the same tokens alone or inside a busy batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from infercast.errors import ConfigError, InfercastError

# Seeds are OpenAI's int64, or numpy's unsigned 64-bit: both fit in [-2**63, 2**64).
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1


class SamplingError(InfercastError):
    """Logits that cannot be turned into a distribution (NaN, all -inf): this request fails."""


@dataclass(frozen=True)
class SamplingParams:
    """How one request turns logits into tokens and when it stops."""

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens={self.max_tokens} must be >= 1")
        if not all(map(math.isfinite, (self.temperature, self.top_p))):
            raise ConfigError("temperature and top_p must be finite numbers")
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"temperature={self.temperature} must be between 0 and 2")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p={self.top_p} must be in (0, 1]")
        if self.top_k < 0:
            raise ConfigError(f"top_k={self.top_k} must be >= 0 (0 turns it off)")
        if self.seed is not None and not SEED_MIN <= self.seed <= SEED_MAX:
            raise ConfigError(f"seed={self.seed} must be a 64-bit integer")
        if any(not s for s in self.stop):
            raise ConfigError("stop strings must not be empty")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    @property
    def numpy_seed(self) -> int | None:
        """The seed as numpy wants it (non-negative): a negative int64 maps to its two's
        complement."""
        return None if self.seed is None else self.seed % 2**64


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """One token id from logits [V]; :class:`SamplingError` if they hold no distribution.

    The maximum is subtracted before dividing by the temperature, so a tiny
    temperature (even a subnormal one) sends the other logits to -inf instead of
    overflowing the leader to inf (inf - inf = NaN): sampling tends to greedy.
    """
    if not np.isfinite(logits).any() or np.isnan(logits).any():
        raise SamplingError("the model produced logits that are NaN or all infinite")
    if params.greedy:
        return int(np.argmax(logits))
    z = logits.astype(np.float64)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        z = (z - z.max()) / params.temperature
    z[np.isnan(z)] = -np.inf  # only -inf - (-inf); the maximum itself is finite
    if params.top_k and params.top_k < z.size:
        kth = np.partition(z, -params.top_k)[-params.top_k]
        z = np.where(z >= kth, z, -np.inf)
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    if not np.isfinite(probs).all():
        raise SamplingError("sampling probabilities are not finite")
    if params.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cum = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cum, params.top_p)) + 1]
        kept = np.zeros_like(probs)
        kept[keep] = probs[keep]
        probs = kept / kept.sum()
    return int(rng.choice(probs.size, p=probs))
