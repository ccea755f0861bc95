"""Small helpers shared by the bench tests: a word-level tokenizer and a bench run against the
mock."""

from __future__ import annotations

from tokenizers import Tokenizer, models, pre_tokenizers

from infercast.bench.datasets import _WORDS
from infercast.bench.mock import MockConfig
from infercast.bench.mock_http import run_in_thread
from infercast.bench.run import BenchConfig, BenchResult, run_bench


def word_tokenizer() -> Tokenizer:
    """One token per whitespace-separated word (unknown words -> [UNK])."""
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(_WORDS))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


def bench_mock(
    mock: MockConfig, tokenizer_path: str | None = None, **bench
) -> tuple[BenchResult, list]:
    """Serve ``mock`` in a thread, run the bench against it; returns (result, the mock's truth
    rows)."""
    defaults = dict(
        model="mock",
        endpoint="chat",
        num_requests=6,
        concurrency=2,
        input_tokens=8,
        output_tokens=8,
        warmup_requests=1,
        tokenizer=tokenizer_path,
    )
    defaults.update(bench)
    with run_in_thread(mock) as (url, server):
        result = run_bench(BenchConfig(base_url=url, **defaults))
        return result, list(server.truth)
