"""Workloads for the bench: what each request asks for, and (for traces) when.

- ``random``: prompts of random common words, exactly ``input_tokens`` long
  with a tokenizer, about that long without one (one common English word is
  one token in Llama/GPT-style BPE vocabularies, within a few percent);
  optional shared prefix of ``shared_prefix_tokens``.
- ShareGPT JSON: the first human turn is the prompt, the reply's length the
  output length (vLLM's convention).
- traces (``azure-conv``, ``azure-code``, or a CSV with
  ``arrival_s,prompt_tokens,output_tokens``): lengths and arrival times replayed.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infercast.errors import ConfigError, DataError

_WORDS = (
    "the of and to in is you that it he was for on are as with his they at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her "
    "would make like him into time has look two more write go see number no way could people "
    "my than first water been call who oil its now find long down day did get come made may "
    "part"
).split()
SHIPPED_TRACES = {"azure-conv": "azure-llm-2023-conv.csv", "azure-code": "azure-llm-2023-code.csv"}


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: prompt text, its token count, the output tokens asked (max_tokens)."""

    request_id: str
    prompt: str
    prompt_tokens: int
    output_tokens: int
    arrival_s: float | None = None  # trace replay: offset from the run's start
    messages: tuple[dict[str, str], ...] | None = None  # chat: the whole history (multi-turn runs)


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens in ``text`` with a ``tokenizers.Tokenizer`` (no special tokens)."""
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def load_tokenizer(path: str | None) -> Any | None:
    """A ``tokenizers.Tokenizer`` from a tokenizer.json file, or None."""
    if not path:
        return None
    if not Path(path).is_file():
        raise ConfigError(f"`tokenizer` {path!r} is not a file; pass a HuggingFace tokenizer.json")
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # noqa: BLE001 - the Rust library raises a bare Exception
        raise ConfigError(
            f"`tokenizer` {path!r} is not a readable tokenizer.json "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(_WORDS, size=max(n, 0)))


def make_prompt(rng: np.random.Generator, n: int, tokenizer: Any | None) -> tuple[str, int]:
    """A prompt of n tokens (exact with a tokenizer, approximate without) and its count."""
    text = _words(rng, n)
    if tokenizer is None:
        return text, n
    for _ in range(8):  # trim or extend until the re-encoded length is exact
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) == n:
            return text, n
        text = tokenizer.decode(ids[:n]) if len(ids) > n else text + " " + _words(rng, n - len(ids))
    return text, count_tokens(tokenizer, text)


def random_specs(
    num: int,
    input_tokens: int,
    output_tokens: int,
    rng: np.random.Generator,
    tokenizer: Any | None = None,
    shared_prefix_tokens: int = 0,
    range_ratio: float = 0.0,
) -> list[RequestSpec]:
    """``num`` random prompts; lengths uniform in [1-r, 1+r] x the given ones (r = range_ratio)."""
    if input_tokens < 1 or output_tokens < 1:
        raise ConfigError(
            f"`input_tokens` {input_tokens} and `output_tokens` {output_tokens} must be >= 1"
        )
    if not 0.0 <= range_ratio < 1.0:
        raise ConfigError(f"`range_ratio` {range_ratio} must be in [0, 1)")
    prefix, n_prefix = (
        make_prompt(rng, shared_prefix_tokens, tokenizer) if shared_prefix_tokens else ("", 0)
    )
    specs = []
    for i in range(num):
        n_in = max(1, round(input_tokens * rng.uniform(1 - range_ratio, 1 + range_ratio)))
        n_out = max(1, round(output_tokens * rng.uniform(1 - range_ratio, 1 + range_ratio)))
        text, n = make_prompt(rng, n_in, tokenizer)
        if prefix:
            text, n = f"{prefix} {text}", n + n_prefix
        specs.append(RequestSpec(f"req-{i}", text, n, n_out))
    return specs


def sharegpt_specs(
    path: str,
    num: int,
    rng: np.random.Generator,
    tokenizer: Any | None = None,
    output_tokens: int | None = None,
) -> list[RequestSpec]:
    """Prompts from a ShareGPT-format JSON list (first human turn; reply length as output)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read ShareGPT file {path!r}: {exc}") from None
    from infercast.sim.trace_formats import approx_tokens, sharegpt_pairs

    pairs = sharegpt_pairs(data)
    if not pairs:
        raise DataError(
            f"{path!r} has no conversations with a prompt and a reply (ShareGPT format)"
        )
    order = rng.permutation(len(pairs))
    specs = []
    for i in range(num):
        prompt, reply = pairs[order[i % len(pairs)]]
        n_in = count_tokens(tokenizer, prompt) if tokenizer else approx_tokens(prompt)
        n_out = output_tokens or (
            count_tokens(tokenizer, reply) if tokenizer else approx_tokens(reply)
        )
        specs.append(RequestSpec(f"req-{i}", prompt, max(n_in, 1), max(n_out, 1)))
    return specs


def read_trace(name_or_path: str) -> np.ndarray:
    """Rows (arrival_s, prompt_tokens, output_tokens) of a shipped or user trace CSV."""
    try:
        from infercast.sim.workload import load_trace  # the simulator's loader, when present
    except ImportError:
        load_trace = None
    if load_trace is not None:
        trace = load_trace(name_or_path)
        return np.column_stack(
            [
                np.asarray(trace.arrival_s, float),
                np.asarray(trace.prompt_tokens, float),
                np.asarray(trace.output_tokens, float),
            ]
        )
    if name_or_path in SHIPPED_TRACES:
        from infercast.specs.catalog import data_path

        text = data_path("traces", SHIPPED_TRACES[name_or_path]).read_text()
    else:
        try:
            text = Path(name_or_path).read_text()
        except OSError as exc:
            raise ConfigError(
                f"`dataset` {name_or_path!r}: {exc.strerror}; give azure-conv, azure-code, "
                "a trace CSV or a ShareGPT JSON file"
            ) from None
    rows = list(csv.DictReader(text.splitlines()))
    try:
        return np.array(
            [
                [float(r["arrival_s"]), float(r["prompt_tokens"]), float(r["output_tokens"])]
                for r in rows
            ]
        )
    except (KeyError, ValueError, TypeError):
        raise DataError(
            f"{name_or_path!r}: need columns arrival_s,prompt_tokens,output_tokens"
        ) from None


def trace_specs(
    name_or_path: str,
    num: int,
    rng: np.random.Generator,
    tokenizer: Any | None = None,
    max_input_tokens: int | None = None,
) -> list[RequestSpec]:
    """The first ``num`` requests of a trace, with arrival offsets from the first one."""
    rows = read_trace(name_or_path)[:num]
    if not len(rows):
        raise DataError(f"trace {name_or_path!r} is empty")
    t0 = rows[0, 0]
    specs = []
    for i, (t, n_in, n_out) in enumerate(rows):
        n_in = int(min(n_in, max_input_tokens or n_in))
        text, n = make_prompt(rng, max(n_in, 1), tokenizer)
        specs.append(RequestSpec(f"req-{i}", text, n, max(int(n_out), 1), arrival_s=float(t - t0)))
    return specs
