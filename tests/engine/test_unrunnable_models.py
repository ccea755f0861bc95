"""`infercast serve --model FILE` on a file the engine cannot run: one clear line, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gguf(path: Path, arch: str = "llama", raw_type=None) -> Path:
    """A GGUF of architecture ``arch`` whose one weight is ``raw_type`` bytes when given."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(256)
    writer.add_feed_forward_length(256)
    writer.add_head_count(4)
    writer.add_head_count_kv(4)
    writer.add_layer_norm_rms_eps(1e-5)
    if raw_type is None:
        writer.add_tensor("token_embd.weight", np.zeros((8, 256), dtype=np.float32))
    else:
        block, size = gguf.GGML_QUANT_SIZES[raw_type]
        raw = np.zeros((8, 256 // block * size), dtype=np.uint8)
        writer.add_tensor("token_embd.weight", raw, raw_dtype=raw_type)  # [8, 256] weights
    writer.add_tensor("output_norm.weight", np.ones(256, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _serve(model: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infercast.cli", "serve", "--model", str(model)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("make, says", [
    (lambda d: _gguf(d / "mamba.gguf", arch="mamba"), "architecture 'mamba' is not supported"),
    (lambda d: _gguf(d / "q8k.gguf", raw_type=gguf.GGMLQuantizationType.Q8_K),
     "is Q8_K, a type this engine cannot run"),
    (lambda d: (d / "junk.gguf").write_bytes(b"not a gguf file at all") and d / "junk.gguf",
     "cannot read GGUF file"),
    (lambda d: (d / "model.onnx").write_bytes(b"\x08\x07") and d / "model.onnx",
     "is neither a .gguf file nor a model directory"),
], ids=["architecture", "tensor-type", "not-gguf", "other-format"])
def test_a_model_the_engine_cannot_run_is_one_line_and_exit_2(tmp_path, make, says):
    out = _serve(make(tmp_path))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in out.stderr
