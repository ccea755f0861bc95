"""Benchmark clients as the harnesses run them: fixed-concurrency (closed-loop) load generators.

A harness preset is one TOML file (``data/harnesses/<name>.toml``, or a file a user writes)
whose fields are those of :class:`HarnessPreset`, each cited in its ``[sources]`` table to the
harness's code. The shipped ones: ``inferencex`` (SemiAnalysis InferenceX's copy of vLLM's
``benchmark_serving.py``), ``vllm-bench-serve`` (``vllm bench serve``),
``sglang-bench-serving`` (``python -m sglang.bench_serving``) and ``aiconfigurator-aiperf``
(aiconfigurator's evaluation runner: AIPerf, genai-perf before it, with fixed lengths).

What a preset fixes, and how the simulator runs it (:func:`closed_loop_workload`):

- ``start = "burst"``: with ``--request-rate inf`` every prompt's task starts at once behind a
  semaphore of C slots, so C requests reach the server at t = 0 and a finished request's slot
  goes to the next prompt at once: the simulator's closed loop (``arrival = "closed"``).
- ``warmup_requests`` (plus ``warmup_requests_per_client`` x C): requests the harness sends and
  waits for before the timed run. Every shipped harness drains them (the clock starts once the
  last warm-up request has returned), so the timed run begins on an idle engine with C requests
  at once, as the simulator's does: recorded, no effect on the numbers.
- ``prompts_per_client`` k (num_prompts = k x C, InferenceX) or ``num_prompts`` (a harness
  default): how many requests the run sends in all. Requests per client set how much of the
  run is the first wave, whose prompts queue behind each other.
- ``range_ratio`` r with ``length_rule``: each request's input and output lengths are drawn
  uniformly from ``[r L, L]`` (``low``: bench_serving, SGLang, InferenceX) or
  ``[L (1 - r), L (1 + r)]`` (``symmetric``: ``vllm bench serve`` since v0.9). With
  ``--ignore-eos`` a request generates exactly its drawn output length. Drawn lengths also
  stop the clients finishing in lockstep.
- ``endpoint = "chat"``: the client sends the prompt as one user message of a chat request, and
  the server applies the model's chat template before tokenizing, so the engine prefills the
  stated length plus the template's tokens (:func:`chat_template_tokens`, a cited table per
  model; a model not in it runs the stated length). Unset: the prompt is sent as it is
  (``/v1/completions`` or the engine's native endpoint).
- ``ttft = "first_text"``: TTFT is timed by the client, from its send to the first streamed
  chunk with text; ``"first_response"`` (AIPerf) to the first streamed response of any content.
  The engines send both with the first token (TensorRT-LLM's ``stream_interval`` and SGLang's
  ``--stream-interval`` still send the first token at once), so the simulator times both at the
  step that produced it. Either holds the serving stack's per-request latency (HTTP, tokenization,
  detokenization) beside the engine's queue and prefill; ``infercast validate`` adds the
  profile's ``request_overhead_s`` for it.

Lengths are simulated as the uniform distribution with the range's mean and standard deviation
(``sim.workload.sample_lengths``: mean +- std sqrt(3), rounded), the harness's integer draw to
within rounding.
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infercast.errors import ConfigError
from infercast.specs.catalog import data_path, read_toml
from infercast.specs.engines import validated


class HarnessPreset(BaseModel):
    """One benchmark client's behaviour (module docstring); every rule cited in ``sources``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    harness: str = Field(min_length=1)  # the tool, as its users call it
    description: str = Field(min_length=1)
    start: Literal["burst"]  # all C clients send at t = 0 (request rate inf behind a semaphore)
    warmup_requests: int = Field(ge=0)
    warmup_requests_per_client: int | None = Field(default=None, ge=1)  # more warm-up: k x C
    prompts_per_client: int | None = Field(default=None, ge=1)  # num_prompts = k x C
    num_prompts: int | None = Field(default=None, ge=1)  # the harness default when k is not set
    range_ratio: float = Field(ge=0, le=1)
    length_rule: Literal["low", "symmetric"]
    ttft: Literal["first_text", "first_response"]
    endpoint: Literal["chat"] | None = None  # chat: the server wraps the prompt in the template
    sources: dict[str, str]

    @model_validator(mode="after")
    def _cited(self) -> HarnessPreset:
        if (self.prompts_per_client is None) == (self.num_prompts is None):
            raise ValueError("set exactly one of prompts_per_client and num_prompts")
        cited = {"name", "harness", "description", "sources"}
        missing = [
            f
            for f in type(self).model_fields
            if f not in cited and getattr(self, f) is not None and not self.sources.get(f)
        ]
        if missing:
            raise ValueError(f"every rule needs its source: add {', '.join(missing)} to [sources]")
        extra = sorted(set(self.sources) - set(type(self).model_fields))
        if extra:
            raise ValueError(f"[sources] names unknown field(s) {', '.join(extra)}")
        return self

    def requests_for(self, concurrency: int) -> int:
        """Requests the timed run sends at this concurrency (at least one per client)."""
        if self.prompts_per_client is not None:
            return max(self.prompts_per_client * concurrency, concurrency)
        assert self.num_prompts is not None  # the validator keeps exactly one of the two set
        return max(self.num_prompts, concurrency)

    def warmup_for(self, concurrency: int) -> int:
        """Warm-up requests the harness sends (and waits for) before the timed run at this
        concurrency."""
        return self.warmup_requests + (self.warmup_requests_per_client or 0) * concurrency

    def length_range(self, tokens: int, range_ratio: float | None = None) -> tuple[int, int]:
        """(lowest, highest) length the harness draws for a stated ``tokens`` (its rule, its ratio
        unless ``range_ratio`` is given)."""
        r = self.range_ratio if range_ratio is None else range_ratio
        if not 0 <= r <= 1:
            raise ConfigError(f"range ratio {r!r}: must be in [0, 1]")
        if self.length_rule == "low":  # randint(max(int(L r), 1), L + 1)
            return max(int(tokens * r), 1), int(tokens)
        return max(math.floor(tokens * (1 - r)), 1), max(math.ceil(tokens * (1 + r)), 1)


def _length_dist(lo: int, hi: int) -> dict:
    """A sim workload length block: fixed, or uniform with the range's mean and std (width / sqrt
    12)."""
    if lo == hi:
        return {"dist": "fixed", "mean": lo}
    return {"dist": "uniform", "mean": (lo + hi) / 2, "std": (hi - lo) / math.sqrt(12.0)}


def closed_loop_workload(
    harness: HarnessPreset,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    range_ratio: float | None = None,
    fixed: bool = False,
    num_prompts: int | None = None,
    model: str | None = None,
) -> dict:
    """The simulator's ``workload`` table for ``harness`` at ``concurrency`` clients.

    ``range_ratio`` replaces the harness's default ratio (a run that set ``--random-range-ratio``);
    ``fixed`` runs the stated lengths exactly (a run that stated fixed lengths); ``num_prompts``
    replaces the harness's request count; ``model`` (a catalog name) adds its chat template's
    tokens to every prompt when the harness sends chat requests.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency {concurrency!r}: must be >= 1")
    n = num_prompts if num_prompts is not None else harness.requests_for(concurrency)
    extra = (chat_template_tokens(model) or 0) if harness.endpoint == "chat" and model else 0
    if fixed:
        lo = hi = input_tokens
    else:
        lo, hi = harness.length_range(input_tokens, range_ratio)
    inp = _length_dist(lo + extra, hi + extra)
    if fixed:
        out = _length_dist(output_tokens, output_tokens)
    else:
        out = _length_dist(*harness.length_range(output_tokens, range_ratio))
    return {
        "arrival": "closed",
        "concurrency": int(concurrency),
        "num_requests": int(max(n, concurrency)),
        "input": inp,
        "output": out,
    }


@functools.cache
def _chat_templates() -> dict[str, int]:
    with data_path("harnesses", "chat_templates.csv").open(newline="", encoding="utf-8") as f:
        return {row["model"]: int(row["template_tokens"]) for row in csv.DictReader(f)}


def chat_template_tokens(model: str) -> int | None:
    """Tokens a model's chat template adds around one user message, generation prompt included
    (``data/harnesses/chat_templates.csv``, each count cited to the template and its token ids);
    None for a model not in the table."""
    return _chat_templates().get(model.strip().lower())


def parse_harness(data: dict, where: str) -> HarnessPreset:
    """A validated harness preset from parsed TOML; a missing or wrong field raises ConfigError."""
    return validated(HarnessPreset, data, "harness preset", where)


def harness_names() -> list[str]:
    """Names of the shipped harness presets."""
    return sorted(p.stem for p in data_path("harnesses").glob("*.toml"))


def _read(path: Path) -> HarnessPreset:
    return parse_harness(
        read_toml(path, "harness preset", "; shipped ones: " + ", ".join(harness_names())),
        str(path),
    )


@functools.lru_cache(maxsize=16)  # presets are frozen; validate asks for one per row
def load_harness(name: str) -> HarnessPreset:
    """A harness preset by name, or from a TOML file."""
    key = name.strip()
    if key.lower().endswith(".toml") or "/" in key:
        return _read(Path(key))
    names = harness_names()
    if key.lower() in names:
        return _read(data_path("harnesses", f"{key.lower()}.toml"))
    raise ConfigError(
        f"unknown harness {name!r}: choose one of {', '.join(names)}, or give a preset .toml"
    )
