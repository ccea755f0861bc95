"""`infercast serve` as a user runs it: prints the URL when ready, serves, exits on Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import gguf
import httpx
import numpy as np
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_prints_url_serves_and_stops_on_sigint():
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infercast.cli",
            "serve",
            "--model",
            "tiny",
            "--port",
            str(port),
            "--max-num-seqs",
            "4",
            "--scheduler",
            "chunked",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stdout.readline()  # blocks until the server says it is ready
        assert f"http://127.0.0.1:{port}/v1" in line
        url = f"http://127.0.0.1:{port}/v1/completions"
        body = {"model": "random-tiny", "prompt": "hi", "max_tokens": 3}
        r = httpx.post(url, json=body, timeout=10)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
        # Ctrl-C while a stream is open: it is drained to its end, then the server exits 0.
        long = {**body, "max_tokens": 400, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", url, json=long, timeout=10) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith("data: ")
            proc.send_signal(signal.SIGINT)
            assert [x for x in lines if x][-1] == "data: [DONE]"
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_rejects_bad_flags_with_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "infercast.cli", "serve", "--model", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "unknown engine model 'nope'" in out.stderr and "Traceback" not in out.stderr


def test_serve_on_a_busy_port_is_one_line_and_exit_2(capsys):
    import pytest

    from infercast.cli import main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--model", "tiny", "--port", str(port)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "already in use" in err and "--port" in err and len(err.splitlines()) == 1


def test_serve_refuses_bad_limits_and_seed_before_binding(capsys):
    import pytest

    from infercast.cli import main

    for args in (
        ["--seed", "-1"],
        ["--max-body-bytes", "0"],
        ["--header-timeout", "inf"],
        ["--port", "70000"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--model", "tiny", *args])
        assert exc.value.code == 2, args
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


ROOT = Path(__file__).resolve().parents[2]  # serve --model FILE: files the engine cannot run


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
    return subprocess.run(
        [sys.executable, "-m", "infercast.cli", "serve", "--model", str(model)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: _gguf(d / "mamba.gguf", arch="mamba"), "architecture 'mamba' is not supported"),
        (
            lambda d: _gguf(d / "q8k.gguf", raw_type=gguf.GGMLQuantizationType.Q8_K),
            "is Q8_K, a type this engine cannot run",
        ),
        (
            lambda d: (d / "junk.gguf").write_bytes(b"not a gguf file at all") and d / "junk.gguf",
            "cannot read GGUF file",
        ),
        (
            lambda d: (d / "model.onnx").write_bytes(b"\x08\x07") and d / "model.onnx",
            "is neither a .gguf file nor a model directory",
        ),
    ],
    ids=["architecture", "tensor-type", "not-gguf", "other-format"],
)
def test_a_model_the_engine_cannot_run_is_one_line_and_exit_2(tmp_path, make, says):
    out = _serve(make(tmp_path))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in out.stderr
