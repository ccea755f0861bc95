"""Datasets: exact prompt lengths with a tokenizer, ShareGPT files, shipped traces."""

import json

import numpy as np
import pytest

from infercast.bench.datasets import count_tokens, random_specs, sharegpt_specs, trace_specs
from infercast.errors import ConfigError, DataError

from .helpers import word_tokenizer


def test_random_prompts_exact_with_tokenizer_and_shared_prefix():
    tok = word_tokenizer()
    specs = random_specs(5, 40, 7, np.random.default_rng(0), tok, shared_prefix_tokens=10)
    assert all(count_tokens(tok, s.prompt) == s.prompt_tokens == 50 for s in specs)
    assert len({" ".join(s.prompt.split()[:10]) for s in specs}) == 1  # one shared prefix
    assert all(s.output_tokens == 7 for s in specs)


def test_random_range_ratio_and_bad_lengths():
    specs = random_specs(200, 100, 100, np.random.default_rng(1), range_ratio=0.5)
    lens = np.array([s.prompt_tokens for s in specs])
    assert 50 <= lens.min() and lens.max() <= 150 and lens.std() > 10
    with pytest.raises(ConfigError):
        random_specs(1, 0, 5, np.random.default_rng(0))


def test_sharegpt(tmp_path):
    data = [
        {
            "conversations": [
                {"from": "human", "value": "hello there friend"},
                {"from": "gpt", "value": "one two three four five"},
            ]
        },
        {"conversations": [{"from": "human", "value": "only one turn"}]},
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    specs = sharegpt_specs(str(path), 3, np.random.default_rng(0))
    # without a tokenizer: characters / 4, rounded up (18 and 23 characters)
    assert [(s.prompt, s.prompt_tokens, s.output_tokens) for s in specs] == [
        ("hello there friend", 5, 6)
    ] * 3
    path.write_text("[]")
    with pytest.raises(DataError):
        sharegpt_specs(str(path), 1, np.random.default_rng(0))


def test_shipped_trace_replays_arrivals_and_lengths():
    specs = trace_specs("azure-conv", 4, np.random.default_rng(0), max_input_tokens=200)
    assert specs[0].arrival_s == 0.0 and specs[1].arrival_s == pytest.approx(4.314579)
    assert [s.output_tokens for s in specs] == [44, 109, 55, 16]
    assert [s.prompt_tokens for s in specs] == [200, 200, 200, 91]
