"""Sampling parameters and the sampler: greedy, temperature, top-k, top-p, seeds.

Top-p is nucleus sampling (Holtzman et al. 2020): keep the smallest set of
most likely tokens whose probability sums to at least p. Temperature 0 means
greedy (argmax), as in the OpenAI API. Each request owns a ``numpy`` Generator
(seeded from its ``seed``, else from the engine's generator), so a seeded
request samples the same tokens alone or inside a busy batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from infercast.errors import ConfigError


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
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"temperature={self.temperature} must be between 0 and 2")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p={self.top_p} must be in (0, 1]")
        if self.top_k < 0:
            raise ConfigError(f"top_k={self.top_k} must be >= 0 (0 turns it off)")
        if any(not s for s in self.stop):
            raise ConfigError("stop strings must not be empty")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """One token id from logits [V]."""
    if params.greedy:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / params.temperature
    if params.top_k and params.top_k < z.size:
        kth = np.partition(z, -params.top_k)[-params.top_k]
        z = np.where(z >= kth, z, -np.inf)
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    if params.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cum = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cum, params.top_p)) + 1]
        kept = np.zeros_like(probs)
        kept[keep] = probs[keep]
        probs = kept / kept.sum()
    return int(rng.choice(probs.size, p=probs))
