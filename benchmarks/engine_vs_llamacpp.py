"""infercast's CPU engine in each weight format vs llama.cpp, same GGUF, same threads.

Two parts (issue 21):

- ``steps`` (in process, no HTTP): for each ``--weights`` format, the engine's
  forward step timed directly at decode batches 1, 8, 32 (one new token on
  ``--context`` cached tokens) and prefills of 128 and 512 tokens. Prints ms per
  step, the bytes a decode step reads (the format's matrices once plus the KV),
  the floor those bytes set at the measured read bandwidth and the fraction of
  it reached, and prefill's fraction of the measured float32 matmul peak. With
  ``--llama-cpp-python PY``, llama.cpp's decode step on the same file, threads
  and batches is timed the same way (in process, ``engine_llamacpp_steps.py``
  run by PY: llama-cpp-python's bindings, no server) before and after
  infercast's, and the better of the two printed.
- ``serve`` (HTTP, as a user runs them): ``infercast serve --weights W`` and
  llama.cpp's server on the same file, one after the other, with the same
  ``--batches`` of concurrent streamed requests (128 output tokens each):
  TPOT (ms per token per request), TTFT and output tokens/s. llama.cpp is not a
  dependency: pass ``--llama-server PATH`` (its ``llama-server`` binary,
  ``-np B`` slots) or ``--llama-cpp-python PY`` (an interpreter with
  ``pip install 'llama-cpp-python[server]'``; that server runs one request at a
  time, so only its batch 1 compares).

Wall times and best process-CPU times are both printed: on a shared machine a
CPU time well under the wall time means the run waited for a core.

    LLAMA_CPP_LIB_PATH=/tmp/llama_keep/build/bin python benchmarks/engine_vs_llamacpp.py steps \
        --threads 1,2 --weights fp32,bf16,int8,q4,auto --batches 1,8 --prefill 128 \
        --llama-cpp-python /tmp/llvenv/bin/python
    python benchmarks/engine_vs_llamacpp.py serve --threads 1,2 --batches 1,8,32 \
        --llama-cpp-python /tmp/llvenv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_vllm import _port, _wait_ready  # noqa: E402  (a sibling script)


def _time(fn, runs: int) -> dict:
    """Best/median wall and best process-CPU seconds (every thread of the process: torch's
    and OpenBLAS's workers too)."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"best_s": min(wall), "median_s": statistics.median(wall), "best_cpu_s": min(cpu)}


def read_bandwidth(runs: int, threads: int) -> float:
    """Best float32 read rate (bytes/s) over twice the LLC: the decode floor's bandwidth."""
    from infercast.engine.machine_probe import read_bandwidth as probe_read
    from infercast.engine.machine_probe import stream_bytes

    return probe_read(stream_bytes(), runs, threads).best


def matrix_bytes(w) -> int:
    """Bytes of the matrices a decode step streams (an untied embedding is read by rows)."""
    mats = [m for lw in w.layers for m in (lw.wqkv, lw.wo, lw.w_gate_up, lw.w_down)]
    return int(sum(m.nbytes for m in mats) + w.lm_head.nbytes)


def step_rows(
    model: str,
    fmt: str,
    threads: int,
    batches,
    prefills,
    context: int,
    runs: int,
    bandwidth: float,
    peak: float,
) -> list[dict]:
    """Decode and prefill step times of one weight format (see the module doc); a format
    ending in ``-torch`` runs q4 products on PyTorch's int4 kernel (the path before the
    numba kernel), one ending in ``-perproduct`` runs decode one product at a time (before
    engine/decode_step.py: at batch 1, and since batchfuse above), one ending in ``-blas`` runs
    fp32 products of 2-8 tokens on OpenBLAS (before the numba loop), one ending in ``-float``
    runs q4 products of 1-4 tokens on the float numba kernel and more widened, and int8
    products on the float numba loop (before the integer ones), one ending in ``-allthreads``
    runs every product but the integer q4 kernel's on all the threads (before
    engine/threads.py), to alternate old and new in one run."""
    import infercast.engine.decode_jit as dj
    import infercast.engine.decode_step as ds
    import infercast.engine.qlinear as ql
    import infercast.engine.threads as th

    jit_max, fused, fp32_max = ql.Q4_JIT_MAX_TOKENS, ds.ENABLED, ql.fp32_jit_max_tokens
    q4_int, int_max, int8_int = dj.Q4_INT, ql.Q4_INT_JIT_MAX_TOKENS, dj.INT8_INT
    q4_torch = ql.Q4_TORCH
    min_work = th.THREADED_MIN_WORK
    if fmt.endswith("-allthreads"):  # threaded at every size, but the integer q4 kernel
        th.THREADED_MIN_WORK = {k: v if k == "q4i" else 0.0 for k, v in min_work.items()}
    if fmt.endswith("-float"):  # q4 and int8 on the float numba loops (before the integer ones)
        dj.Q4_INT = dj.INT8_INT = False
    if fmt.endswith("-torch"):  # q4 in PyTorch's packing, on its int4 kernel (the old path)
        ql.Q4_TORCH = True
    if fmt.endswith("-perproduct"):  # decode one product at a time (not fused)
        ds.ENABLED = False
    if fmt.endswith("-blas"):  # fp32 products on OpenBLAS at every size (the old path)
        ql.fp32_jit_max_tokens = lambda: 1
    try:
        out = _step_rows(
            model,
            fmt.removesuffix("-torch")
            .removesuffix("-allthreads")
            .removesuffix("-perproduct")
            .removesuffix("-blas")
            .removesuffix("-float"),
            threads,
            batches,
            prefills,
            context,
            runs,
            bandwidth,
            peak,
        )
    finally:
        ql.Q4_JIT_MAX_TOKENS, ds.ENABLED, ql.fp32_jit_max_tokens = jit_max, fused, fp32_max
        dj.Q4_INT, ql.Q4_INT_JIT_MAX_TOKENS, dj.INT8_INT = q4_int, int_max, int8_int
        ql.Q4_TORCH = q4_torch
        th.THREADED_MIN_WORK = min_work
    for r in out:
        r["asked"] = fmt
    return out


def _step_rows(model, fmt, threads, batches, prefills, context, runs, bandwidth, peak):
    from threadpoolctl import threadpool_limits

    from infercast.engine.engine import make_model
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.model import SeqInput
    from infercast.engine.predict import decode_read_bytes, matmul_flops

    loaded = load(model, weights=fmt)
    cfg, w = loaded.cfg, loaded.weights
    net = make_model(loaded, max(context + 2, max(prefills) + 1), "numpy", threads)
    per_seq = -(-(context + 1) // 16)
    kv = PagedKVStore(cfg, max(batches) * per_seq, 16)
    out = []
    with threadpool_limits(threads):
        for b in batches:
            seqs = [
                SeqInput([7], context, list(range(i * per_seq, (i + 1) * per_seq)))
                for i in range(b)
            ]
            r = _time(lambda seqs=seqs: net.forward(seqs, kv), runs)
            read = decode_read_bytes(cfg, w, [context + 1] * b, matrix_bytes(w))
            r.update(
                kind="decode",
                batch=b,
                bytes_read=read,
                floor_s=read / bandwidth,
                frac_of_floor=read / bandwidth / r["best_s"],
                frac_of_floor_cpu=read / bandwidth / r["best_cpu_s"],
            )
            out.append(r)
        for n in prefills:
            kvp = PagedKVStore(cfg, -(-n // 16) + 1, 16)
            seq = [SeqInput(list(np.arange(n) % cfg.vocab_size), 0, list(range(-(-n // 16))))]
            r = _time(lambda seq=seq, kvp=kvp: net.forward(seq, kvp), max(2, runs // 2))
            flops = matmul_flops(cfg, n, 0)
            r.update(
                kind="prefill",
                tokens=n,
                frac_of_peak=flops / r["best_s"] / peak,
                frac_of_peak_cpu=flops / r["best_cpu_s"] / peak,
            )
            out.append(r)
    for r in out:
        r.update(
            weights=loaded.weights_format, asked=fmt, threads=threads, weight_bytes=matrix_bytes(w)
        )
    return out


def cmd_steps(args) -> list[dict]:
    from threadpoolctl import threadpool_limits

    from infercast.engine.machine_probe import matmul_flops_fp32

    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        bw = args.bandwidth_gbs * 1e9 if args.bandwidth_gbs else read_bandwidth(3, threads)
        with threadpool_limits(threads):
            peak = matmul_flops_fp32(1536, 3, threads).best
        print(
            f"# {threads} thread(s): read bandwidth {bw / 1e9:.1f} GB/s, "
            f"fp32 matmul peak {peak / 1e9:.0f} GFLOP/s",
            flush=True,
        )
        llama = llama_steps(args, threads)  # before and after infercast's: the best of both
        for fmt in args.weights.split(","):
            for r in step_rows(
                args.model,
                fmt,
                threads,
                [int(b) for b in args.batches.split(",")],
                [int(n) for n in args.prefill.split(",")],
                args.context,
                args.runs,
                bw,
                peak,
            ):
                rows.append(r)
                if r["kind"] == "decode":
                    print(
                        f"{r['asked']:>10} t={threads} decode b={r['batch']:>2}: "
                        f"{r['best_s'] * 1e3:7.1f} ms wall ({r['best_cpu_s'] * 1e3:6.1f} cpu), "
                        f"reads {r['bytes_read'] / 1e6:6.1f} MB, floor {r['floor_s'] * 1e3:5.1f}"
                        f" ms: {r['frac_of_floor']:.2f} of it ({r['frac_of_floor_cpu']:.2f} cpu)",
                        flush=True,
                    )
                else:
                    print(
                        f"{r['asked']:>10} t={threads} prefill {r['tokens']}: "
                        f"{r['best_s'] * 1e3:7.0f} ms wall ({r['best_cpu_s'] * 1e3:6.0f} cpu), "
                        f"{r['frac_of_peak']:.2f} of matmul peak ({r['frac_of_peak_cpu']:.2f} "
                        f"cpu)",
                        flush=True,
                    )
        rows += _best_llama(llama + llama_steps(args, threads))
    return rows


def llama_steps(args, threads: int) -> list[dict]:
    """llama.cpp's decode steps at ``args.batches`` (engine_llamacpp_steps.py in the
    ``--llama-cpp-python`` interpreter); [] without one."""
    if not args.llama_cpp_python:
        return []
    from infercast.engine.loader import SMOLLM2_NAME, smollm2_path

    gguf = str(smollm2_path()) if args.model == SMOLLM2_NAME else args.model
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine_llamacpp_steps.py")
    done = subprocess.run(
        [
            args.llama_cpp_python,
            script,
            "--model",
            gguf,
            "--threads",
            str(threads),
            "--batches",
            args.batches,
            "--context",
            str(args.context),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
    )
    if done.returncode:
        raise SystemExit(f"llama.cpp steps failed: {done.stderr.strip()[-500:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _best_llama(rows: list[dict]) -> list[dict]:
    best: dict = {}
    for r in rows:
        key = (r["threads"], r["batch"])
        if key not in best or r["best_ms"] < best[key]["best_ms"]:
            best[key] = r
    for r in best.values():
        print(
            f"llama.cpp t={r['threads']} decode b={r['batch']:>2}: {r['best_ms']:7.1f} ms "
            f"wall ({r['best_cpu_ms']:6.1f} cpu), median {r['median_ms']:.1f}",
            flush=True,
        )
    return [dict(r, kind="decode", weights="llama.cpp") for r in best.values()]


def measure_batch(url: str, model: str, batch: int, prompt_tokens: int, output_tokens: int):
    """``batch`` concurrent streamed requests at once; their metrics summary."""
    import asyncio

    from infercast.bench.client import BenchClient, ClientConfig
    from infercast.bench.datasets import RequestSpec
    from infercast.bench.load import LoadPlan, run_load
    from infercast.metrics.summary import MetricsAccumulator

    specs = [
        RequestSpec(
            f"r{i}",
            "The quick brown fox jumps. " * (prompt_tokens // 6),
            prompt_tokens,
            output_tokens,
            0.0,
        )
        for i in range(batch)
    ]

    async def go():
        async with BenchClient(ClientConfig(base_url=f"{url}/v1", model=model)) as client:
            return await run_load(
                client, specs, LoadPlan(replay_arrivals=True), np.random.default_rng(0)
            )

    acc = MetricsAccumulator()
    for rec in asyncio.run(go()).records:
        acc.add(rec)
    return acc.summary()


def _served_model(url: str) -> str:
    """The model id a server lists (infercast's server answers 400 to any other name)."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as r:
        return json.load(r)["data"][0]["id"]


def serve_rows(name: str, cmd: list[str], url: str, model: str, batches, args) -> list[dict]:
    """Start ``cmd``, measure ``batches``, stop it; ``model`` "" asks the server its id."""
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        # llama-cpp-python's server has no /health; llama-server and infercast have both.
        _wait_ready(url, proc, args.startup_s, ("/health", "/v1/models"))
        model = model or _served_model(url)
        measure_batch(url, model, 1, args.prompt_tokens, 8)  # warm-up
        for b in batches:
            s = measure_batch(url, model, b, args.prompt_tokens, args.output_tokens)
            row = {
                "server": name,
                "batch": b,
                "tpot_ms": s.tpot.mean * 1e3,
                "ttft_ms": s.ttft.mean * 1e3,
                "output_tokens_per_s": s.output_throughput_tps,
            }
            print(
                f"{name:>32} b={b:>2}: TPOT {row['tpot_ms']:6.1f} ms, TTFT "
                f"{row['ttft_ms']:7.0f} ms, {row['output_tokens_per_s']:6.1f} tok/s",
                flush=True,
            )
            rows.append(row)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return rows


def cmd_serve(args) -> list[dict]:
    from infercast.engine.loader import SMOLLM2_NAME, smollm2_path

    gguf = str(smollm2_path()) if args.model == SMOLLM2_NAME else args.model
    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for fmt in args.weights.split(","):
            port = _port()
            cmd = [
                sys.executable,
                "-m",
                "infercast.cli",
                "serve",
                "--model",
                gguf,
                "--port",
                str(port),
                "--threads",
                str(threads),
                "--weights",
                fmt,
                "--max-num-seqs",
                str(max(batches)),
                "--max-model-len",
                "1024",
            ]
            rows += [
                dict(r, threads=threads)
                for r in serve_rows(
                    f"infercast --weights {fmt} t={threads}",
                    cmd,
                    f"http://127.0.0.1:{port}",
                    "",
                    batches,
                    args,
                )
            ]
        port = _port()
        if args.llama_server:
            cmd = [
                args.llama_server,
                "-m",
                gguf,
                "--port",
                str(port),
                "-t",
                str(threads),
                "-np",
                str(max(batches)),
                "-c",
                str(1024 * max(batches)),
                "-cb",
            ]
        elif args.llama_cpp_python:
            cmd = [
                args.llama_cpp_python,
                "-m",
                "llama_cpp.server",
                "--model",
                gguf,
                "--port",
                str(port),
                "--n_threads",
                str(threads),
                "--n_ctx",
                "1024",
            ]
        else:
            continue
        rows += [
            dict(r, threads=threads)
            for r in serve_rows(
                f"llama.cpp t={threads}", cmd, f"http://127.0.0.1:{port}", gguf, batches, args
            )
        ]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=["steps", "serve"])
    ap.add_argument("--model", default="smollm2-135m", help="smollm2-135m or a .gguf path")
    ap.add_argument(
        "--weights",
        default="fp32,bf16,int8,auto",
        help="formats to run (auto: the file's own, q4+int8 for SmolLM2's Q4_1; q4-torch, "
        "auto-torch: q4 products on PyTorch's int4 kernel; q4-perproduct, auto-perproduct: "
        "decode without the fused steps; fp32-blas: fp32 products on OpenBLAS; q4-float, "
        "auto-float, int8-float: q4 products on the float numba kernel (1-4 tokens) and widened "
        "tiles beyond, int8 products on the float numba loop)",
    )
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--prefill", default="128,512")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bandwidth-gbs", type=float, help="read bandwidth (default: measured)")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--startup-s", type=float, default=300)
    ap.add_argument("--llama-server", help="path of llama.cpp's llama-server binary")
    ap.add_argument(
        "--llama-cpp-python",
        help="python with llama-cpp-python (steps: its ctypes bindings are enough, "
        "with LLAMA_CPP_LIB_PATH at built libraries; serve: its [server])",
    )
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args()
    rows = cmd_steps(args) if args.part == "steps" else cmd_serve(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
