"""Serial vs threaded, per weight product: where do the threads pay on this CPU?

The engine runs each weight product on one thread or on ``serve --threads`` threads; the
split pays only when the product is big enough to cover the threads' start and join
(numba's workqueue: ~60-100 us a product on a 2-core machine; PyTorch's OpenMP region;
OpenBLAS's pool) and, with two pools in one process, their idle workers' spinning. This
script times every kernel path the engine has, serial and threaded, alternated, over the
products of a decode step's chain (SmolLM2-135M's 30 layers of 4 matrices and its head,
so the weights come from DRAM as in a step; one layer of a 7-8B model, Llama-3-8B's
shapes), at ``--tokens`` tokens, and prints per path:

- a row per (matrix, tokens): the work (rows x columns x tokens, weight-tokens), the best
  wall microseconds of one product serial and threaded (over the chain's layers and the
  rounds: the figure of a moment when both cores were free), and threaded / serial;
- the crossover: the work from which threading loses least over the measured products
  (``inf``: never thread), the figure :data:`infercast.engine.threads.THREADED_MIN_WORK`
  holds for the path.

Paths: ``int8``, ``int8i``, ``bf16``, ``fp32``, ``q4i`` (the engine's numba loops,
``decode_jit.Kernels.product``), ``torch-int8``, ``torch-bf16``, ``torch-int4`` (PyTorch's
``_weight_int8pack_mm``, bf16 matmul, ``_weight_int4pack_mm_for_cpu``, intra-op threads
1 or N), ``blas`` (``engine/linear.py``'s OpenBLAS products, its pool at 1 or N),
``widen-bf16``, ``widen-q4`` (prefill's widening of a whole matrix into float32, PyTorch's
copy on 1 or N threads, or q4's numba kernels' layout widened on one, each followed by the
128-token OpenBLAS product it feeds, on N: the two pools meet there; work is the matrix's
weights).

Wall time is what threads save; on a shared machine a second thread may find no free
core, so run it quiet, and read the load it prints.

    python benchmarks/thread_crossover.py --threads 2 --runs 5
    python benchmarks/thread_crossover.py --paths int8,bf16 --models smollm2 --tokens 1,8
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

MODELS = {
    # (out, in) per layer, layers, extra matrices once per chain (the LM head)
    "smollm2": (((960, 576), (576, 576), (3072, 576), (576, 1536)), 30, ((49152, 576),)),
    "8b": (((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)), 1, ()),
}
PATHS = (
    "int8",
    "int8i",
    "bf16",
    "fp32",
    "q4i",
    "torch-int8",
    "torch-bf16",
    "torch-int4",
    "blas",
    "widen-bf16",
    "widen-q4",
)


def make_path(path: str, torch, threads: int):
    """(build(w fp32 [N, K]) -> state, run(state, x_rows [T, K], n_threads)) for one path."""
    from threadpoolctl import ThreadpoolController

    from infercast.engine.decode_jit import Q4_ROWS, kernels
    from infercast.engine.linear import linear_fm
    from infercast.engine.qformats import GROUP, quantize_int8_rows, quantize_q4
    from infercast.engine.qlinear import torch_int4_packing
    from infercast.engine.widen import q4_layout_blocks

    jit = kernels()

    def numba_run(fmt):
        def run(args, x, n):
            out = np.empty((args[-1], x.shape[0]), dtype=np.float32)
            kernel = jit.product(fmt, n)
            if fmt == "q4i":
                kernel(args[0], x, out, n)
            elif fmt == "int8i":
                kernel(*args[:-1], x, out, n)
            else:
                kernel(*args[:-1], x, out)
            return out

        return run

    def torch_run(op):
        def run(args, x, n):
            torch.set_num_threads(n)
            return op(args, torch.from_numpy(x).to(torch.bfloat16))

        return run

    if path == "int8":
        return (lambda w: (*quantize_int8_rows(w), w.shape[0])), numba_run("int8")
    if path == "int8i":

        def int8i(w):
            q, sc = quantize_int8_rows(w)
            return q, q.sum(axis=1, dtype=np.int32), sc, w.shape[0]

        return int8i, numba_run("int8i")
    if path == "bf16":

        def bits(w):
            b = torch.from_numpy(w).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
            return b, w.shape[0]

        return bits, numba_run("bf16")
    if path == "fp32":
        return (lambda w: (w, w.shape[0])), numba_run("fp32")
    if path == "q4i":
        from infercast.engine.decode_jit import q4_int_layout

        def q4i(w):
            r = quantize_q4(w)
            qv = q4_int_layout(r.q, r.scale, r.zero - 8.0 * r.scale)
            return qv, qv.shape[0] * Q4_ROWS

        return q4i, numba_run("q4i")
    if path == "torch-int8":

        def int8(w):
            q, s = quantize_int8_rows(w)
            return torch.from_numpy(q), torch.from_numpy(s).to(torch.bfloat16)

        op = torch.ops.aten._weight_int8pack_mm
        return int8, torch_run(lambda a, xt: op(xt, *a))
    if path == "torch-bf16":
        return (lambda w: torch.from_numpy(w).to(torch.bfloat16)), torch_run(lambda a, xt: xt @ a.T)
    if path == "torch-int4":
        op = torch.ops.aten._weight_int4pack_mm_for_cpu
        return (lambda w: torch_int4_packing(quantize_q4(w))), torch_run(
            lambda a, xt: op(xt, a[0], GROUP, a[1])
        )
    if path == "blas":
        blas = ThreadpoolController().select(internal_api="openblas").lib_controllers

        def run(w, x, n):
            for lib in blas:
                lib.set_num_threads(n)
            return linear_fm(w, np.ascontiguousarray(x.T))

        return (lambda w: w), run
    # A widening is timed with the OpenBLAS product that follows it in prefill (128 tokens,
    # OpenBLAS on ``threads``): the widening's threads meet OpenBLAS's there.
    blas_libs = ThreadpoolController().select(internal_api="openblas").lib_controllers
    prefill = {}

    def then_gemm(buf, k):
        for lib in blas_libs:
            lib.set_num_threads(threads)
        if k not in prefill:
            prefill[k] = np.random.default_rng(k).standard_normal((k, 128), dtype=np.float32)
        return buf @ prefill[k] if buf.shape[1] == k else buf.T @ prefill[k]

    if path == "widen-bf16":

        def run(a, x, n):
            w, buf = a
            torch.set_num_threads(n)
            torch.from_numpy(buf).copy_(w)
            return then_gemm(buf, x.shape[1])

        return (
            lambda w: (torch.from_numpy(w).to(torch.bfloat16), np.empty(w.shape, np.float32))
        ), run
    if path == "widen-q4":
        from infercast.engine.decode_jit import q4_layout

        def build(w):  # the numba kernels' layout, widened on one thread (engine/widen.py)
            r = quantize_q4(w)
            layout = q4_layout(r.q, r.scale, r.zero - 8.0 * r.scale)
            return layout, np.empty((w.shape[1], layout[0].shape[0] * Q4_ROWS), np.float32)

        def run(a, x, n):
            layout, buf = a
            q4_layout_blocks(layout, 0, buf)
            return then_gemm(buf, x.shape[1])

        return build, run
    raise SystemExit(f"unknown path {path!r}: use {', '.join(PATHS)}")


def measure(path, model, tokens_list, threads, runs, torch, rng):
    """Rows of (shape, tokens, work, serial_s, threaded_s) for one path on one model."""
    shapes, layers, once = MODELS[model]
    build, run = make_path(path, torch, threads)
    chain = [(s, build(rng.uniform(-0.05, 0.05, s).astype(np.float32))) for s in once]
    for _ in range(layers):
        chain += [(s, build(rng.uniform(-0.05, 0.05, s).astype(np.float32))) for s in shapes]
    mats = sorted({s for s, _ in chain}, key=lambda s: s[0] * s[1])
    widen = path.startswith("widen")
    rows = []
    for t in [1] if widen else tokens_list:
        xs = {k: rng.standard_normal((t, k), dtype=np.float32) for k in {s[1] for s, _ in chain}}
        best = {(s, n): float("inf") for s in mats for n in (1, threads)}
        for r in range(runs + 1):  # the first round warms up (compiles, faults pages in)
            for n in (1, threads) if r % 2 else (threads, 1):  # alternated
                for s, a in chain:
                    t0 = time.perf_counter()
                    run(a, xs[s[1]], n)
                    if r:
                        best[s, n] = min(best[s, n], time.perf_counter() - t0)
        for s in mats:
            work = s[0] * s[1] * (1 if widen else t)
            rows.append((s, t, work, best[s, 1], best[s, threads]))
    return rows


def crossover(rows) -> float:
    """The work from which the rule "threaded at and above it" loses the least: the summed
    |log(threaded / serial)| (capped at log 2: one product slowed by a busy machine counts
    as no more than a 2x miss) of the products it puts on the slower side, over every
    candidate (each measured work, and ``inf``: never threaded); ties go to the larger."""
    import math

    def lost(w0: float) -> float:
        return sum(
            min(abs(math.log(sn / s1)), math.log(2))
            for _, _, w, s1, sn in rows
            if (w >= w0) != (sn < s1)
        )

    return min([float("inf"), *sorted({r[2] for r in rows}, reverse=True)], key=lost)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--models", default="smollm2,8b")
    ap.add_argument("--tokens", default="1,2,4,8,16,32,48")
    args = ap.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    tokens = [int(t) for t in args.tokens.split(",")]
    rng = np.random.default_rng(0)
    print(f"# load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, {args.threads} threads")
    print("| path | model | matrix | tokens | work | serial us | threaded us | threaded/serial |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    summary = []
    with threadpool_limits(1):
        for path in args.paths.split(","):
            rows = []
            for model in args.models.split(","):
                for s, t, work, s1, sn in measure(
                    path, model, tokens, args.threads, args.runs, torch, rng
                ):
                    rows.append((s, t, work, s1, sn))
                    print(
                        f"| {path} | {model} | {s[0]}x{s[1]} | {t} | {work:.3g} | {s1 * 1e6:.0f} |"
                        f" {sn * 1e6:.0f} | {sn / s1:.2f} |",
                        flush=True,
                    )
            summary.append((path, crossover(rows)))
            torch.set_num_threads(1)
    print(f"# load {os.getloadavg()[0]:.1f}")
    print("| path | threaded from (weight-tokens) |")
    print("| --- | --- |")
    for path, w in summary:
        print(f"| {path} | {w:.3g} |")


if __name__ == "__main__":
    main()
