"""The optional torch (bf16) backend: same paged forward, bf16-close to the reference."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from infercast.engine.config import named_config
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.model import SeqInput
from infercast.engine.reference import reference_logits
from infercast.engine.weights import random_weights


def test_missing_torch_is_a_config_error(monkeypatch):
    from infercast.engine.torch_model import import_torch
    from infercast.errors import ConfigError

    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(ConfigError, match=r"infercast\[torch\]"):
        import_torch()


@pytest.mark.parametrize("size", ["tiny", "tiny-llama3"])
def test_torch_paged_chunked_forward_is_bf16_close_to_reference(size):
    pytest.importorskip("torch")
    from infercast.engine.torch_model import TorchLlamaModel

    cfg = named_config(size)
    w = random_weights(cfg, seed=2)
    model = TorchLlamaModel(cfg, w, 256)
    kv = PagedKVStore(cfg, 64, 4)
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 256, 37).tolist(), rng.integers(0, 256, 9).tolist()
    first = model.forward(
        [SeqInput(a[:16], 0, [5, 9, 1, 3, 60, 2, 7, 8, 10, 11]), SeqInput(b, 0, [20, 21, 22])],
        kv,
        all_logits=True,
    )
    rest = model.forward(
        [SeqInput(a[16:], 16, [5, 9, 1, 3, 60, 2, 7, 8, 10, 11])], kv, all_logits=True
    )[0]
    for got, ref in (
        (np.concatenate([first[0], rest]), reference_logits(cfg, w, a)),
        (first[1], reference_logits(cfg, w, b)),
    ):
        assert np.abs(got - ref).max() < 2e-2 * np.abs(ref).max()  # bf16: 8 mantissa bits
        assert (got.argmax(-1) == ref.argmax(-1)).mean() > 0.9


def test_torch_engine_serves_requests_to_completion():
    pytest.importorskip("torch")
    import time

    from infercast.engine.engine import Engine, EngineConfig
    from infercast.engine.loader import load
    from infercast.engine.sampling import SamplingParams

    e = Engine(
        load("tiny"),
        EngineConfig(backend="torch", block_size=4, kv_cache_bytes=4e6, max_num_batched_tokens=24),
        time.monotonic,
        np.random.default_rng(0),
    )
    for i in range(3):
        e.add(f"r{i}", list(range(10 + 9 * i)), SamplingParams(max_tokens=6, ignore_eos=True))
    e.run_until_done()
    assert sorted((r.request_id, r.output_tokens) for r in e.finished) == [
        ("r0", 6),
        ("r1", 6),
        ("r2", 6),
    ]
    assert e.scheduler.kv.num_used_blocks == 0
