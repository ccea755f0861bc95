"""`--weights`: the engine runs every format end to end; bad formats fail in one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from infercast.engine.kv_store import PagedKVStore
from infercast.engine.loader import load, resolve_weights
from infercast.engine.model import LlamaModel, SeqInput
from infercast.engine.weights import dense_weights
from infercast.errors import ConfigError

IDS = [5, 99, 200, 3, 41, 17, 250, 8]


def _logits(loaded) -> np.ndarray:
    cfg = loaded.cfg
    model = LlamaModel(cfg, loaded.weights, 64)
    return model.forward(
        [SeqInput(IDS, 0, [0, 1, 2, 3])], PagedKVStore(cfg, 4, 16), all_logits=True
    )[0]


# q4: 4 bits a weight plus a float32 scale and offset per group of 32 (the numba kernel's
# layout, docs/cpu-kernels.md); PyTorch's packing alone is 0.625.
@pytest.mark.parametrize("fmt, bytes_per_weight", [("bf16", 2), ("int8", 1), ("q4", 0.75)])
def test_each_format_runs_the_model_close_to_its_own_dense_weights(fmt, bytes_per_weight):
    pytest.importorskip("torch")
    loaded = load("tiny", weights=fmt)
    assert loaded.weights_format == fmt
    layer = loaded.weights.layers[0]
    assert layer.w_down.nbytes <= layer.w_down.shape[0] * layer.w_down.shape[1] * (
        bytes_per_weight + 0.2
    )
    got = _logits(loaded)
    dense = loaded.__class__(
        loaded.name, loaded.cfg, dense_weights(loaded.weights), loaded.tokenizer, 0
    )
    ref = _logits(dense)  # the same (rounded) weights in float32: only activations differ
    assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max()


@pytest.mark.parametrize("kernel", ["integer", "float"])
def test_q4_prefill_and_decode_multiply_the_same_weights(kernel, monkeypatch):
    """A prompt's prefill (widened tiles + OpenBLAS, and the last token prefilled after the
    rest) and its token-by-token decode (the numba kernels, fused) give the last token the
    same logits: the same fp16 weights everywhere, so only float32 rounding separates them,
    and the integer kernel's activations quantized to 2^-16 of each group's largest (3e-5
    here; 2.2e-3 when prefill used PyTorch's packing, its scales rounded to bf16)."""
    pytest.importorskip("torch")
    import infercast.engine.decode_jit as dj

    if dj.kernels() is None:
        pytest.skip("numba is not installed: q4 is PyTorch's packing throughout")
    if kernel == "float":
        monkeypatch.setattr(dj, "Q4_INT", False)
    elif dj.q4_isa() is None:
        pytest.skip("this CPU has no integer q4 kernel")
    loaded = load("tiny", weights="q4")
    cfg = loaded.cfg
    model = LlamaModel(cfg, loaded.weights, 256)
    assert model.fused is not None
    prompt = list(np.arange(120) % 250)  # > KERNEL_MAX_TOKENS: the widening path
    kv = PagedKVStore(cfg, 16, 16)
    full = model.forward([SeqInput(prompt, 0, list(range(8)))], kv, all_logits=True)[0][-1]
    kv2 = PagedKVStore(cfg, 16, 16)
    model.forward([SeqInput(prompt[:-1], 0, list(range(8)))], kv2)
    split = model.forward([SeqInput(prompt[-1:], len(prompt) - 1, list(range(8)))], kv2)[0]
    kv3 = PagedKVStore(cfg, 16, 16)
    for i, t in enumerate(prompt):
        decoded = model.forward([SeqInput([t], i, list(range(8)))], kv3)[0]
    tol = (1e-5 if kernel == "float" else 3e-4) * np.abs(full).max()
    assert np.abs(split - full).max() < tol
    assert np.abs(decoded - full).max() < tol


def test_unknown_weights_format_is_a_config_error():
    with pytest.raises(ConfigError, match="`weights` 'q3'"):
        resolve_weights("q3")


def test_serve_with_an_unknown_weights_format_exits_2_in_one_line():
    r = subprocess.run(
        [sys.executable, "-m", "infercast.cli", "serve", "--model", "tiny", "--weights", "q3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "--weights 'q3'" in lines[0]


@pytest.mark.parametrize("kind", ["architecture", "not gguf"])
def test_serve_refuses_a_model_file_it_cannot_run_in_one_line(tmp_path, kind):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "m.gguf"
    if kind == "architecture":
        w = gguf.GGUFWriter(str(path), "gpt2")
        w.add_block_count(1)
        w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    else:
        path.write_bytes(b"not a gguf file at all")
    r = subprocess.run(
        [sys.executable, "-m", "infercast.cli", "serve", "--model", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, lines
    assert ("gpt2" if kind == "architecture" else "cannot read GGUF") in lines[0]
