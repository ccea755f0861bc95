"""llama.cpp's decode step on a GGUF file, timed in process (no HTTP), as JSON lines.

Runs in an interpreter that has the ``llama_cpp`` package (llama-cpp-python's
ctypes bindings; with ``LLAMA_CPP_LIB_PATH`` pointing at already built
``libllama.so``/``libggml*.so`` no build is needed), not in infercast's
environment: :mod:`engine_vs_llamacpp` ``steps --llama-cpp-python PY`` starts it
and reads its output. For each thread count and batch B it fills B sequences
with ``--context`` tokens, then times ``--steps`` calls of ``llama_decode`` with
one new token per sequence (the batch-B decode step a server runs), logits for
every token. Prints one JSON object per (threads, batch): best and median wall
ms per step, and the process CPU ms of the best step (llama.cpp's own threads
included).

    LLAMA_CPP_LIB_PATH=/tmp/llama_keep/build/bin /tmp/llvenv/bin/python \\
        benchmarks/engine_llamacpp_steps.py --model FILE.gguf --threads 1,2 --batches 1,8
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def _batch(llama_cpp, tokens: list[tuple[int, int, int, bool]]):
    """A llama_batch of (token, position, sequence, wants logits) entries."""
    b = llama_cpp.llama_batch_init(len(tokens), 0, 1)
    for i, (tok, pos, seq, logits) in enumerate(tokens):
        b.token[i], b.pos[i], b.n_seq_id[i] = tok, pos, 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits
    b.n_tokens = len(tokens)
    return b


def time_steps(llama_cpp, model, threads: int, batch: int, context: int, steps: int) -> dict:
    """Best/median wall and CPU time of ``steps`` batch-``batch`` decode steps."""
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = batch * (context + steps + 16)
    params.n_batch = params.n_ubatch = max(context, batch)
    params.n_seq_max = batch
    params.n_threads = params.n_threads_batch = threads
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise SystemExit("llama_init_from_model failed")
    try:
        for seq in range(batch):  # the cached context: one prefill per sequence
            b = _batch(
                llama_cpp, [(1 + (i * 7) % 1000, i, seq, i == context - 1) for i in range(context)]
            )
            if llama_cpp.llama_decode(ctx, b) != 0:
                raise SystemExit("prefill failed")
            llama_cpp.llama_batch_free(b)
        wall, cpu = [], []
        for step in range(steps + 1):  # the first step warms up
            b = _batch(llama_cpp, [(7, context + step, seq, True) for seq in range(batch)])
            t0, c0 = time.perf_counter(), time.process_time()
            if llama_cpp.llama_decode(ctx, b) != 0:
                raise SystemExit("decode failed")
            llama_cpp.llama_synchronize(ctx)
            t1, c1 = time.perf_counter(), time.process_time()
            llama_cpp.llama_batch_free(b)
            if step:
                wall.append(t1 - t0)
                cpu.append(c1 - c0)
        best = min(range(len(wall)), key=wall.__getitem__)
        return {
            "server": "llama.cpp",
            "threads": threads,
            "batch": batch,
            "context": context,
            "best_ms": wall[best] * 1e3,
            "median_ms": statistics.median(wall) * 1e3,
            "best_cpu_ms": cpu[best] * 1e3,
        }
    finally:
        llama_cpp.llama_free(ctx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF file")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--context", type=int, default=128, help="cached tokens per sequence")
    ap.add_argument("--steps", type=int, default=20, help="timed decode steps per batch")
    args = ap.parse_args()
    import llama_cpp

    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(
        args.model.encode(), llama_cpp.llama_model_default_params()
    )
    if not model:
        raise SystemExit(f"cannot load {args.model}")
    for t in (int(x) for x in args.threads.split(",")):
        for b in (int(x) for x in args.batches.split(",")):
            print(
                json.dumps(time_steps(llama_cpp, model, t, b, args.context, args.steps)), flush=True
            )
    llama_cpp.llama_model_free(model)


if __name__ == "__main__":
    main()
