"""How many threads one weight product runs on: one rule for every kernel path.

With ``serve --threads N`` a product may split across N threads, but the split pays only for
a product big enough to cover the threads' start and join (numba's workqueue layer wakes
each worker twice a region through a condition variable, a task to sync its thread count
then the work: numba 0.68 numba/np/ufunc/workqueue.c ``parallel_for``; ~25-50 us a product
at best on the 2-core machine this was measured on, a time slice a wake under load), and
only where a second core adds something the first lacks (here one core already reads DRAM at
the machine's rate: 42.9 GB/s, 42.6 with two, docs/engine.md). Below the crossover the
threads cost more than they save, and a pool whose idle workers spin takes the core the next
product needs (PyTorch's OpenMP workers, libgomp's GOMP_SPINCOUNT,
https://gcc.gnu.org/onlinedocs/libgomp/GOMP_005fSPINCOUNT.html; OpenBLAS's, which spin until
their thread_timeout in driver/others/blas_server.c ``blas_thread_server``; numba's block):
with PyTorch's two-thread bf16 widening between two-thread OpenBLAS products a 128-token
prefill of SmolLM2-135M ran 1,029 ms against 251 on one thread.

The rule (:func:`product_threads`): a product of a [rows, cols] matrix by ``tokens`` tokens
runs on ``threads`` threads when its work, rows x cols x tokens weight-tokens, reaches the
crossover of its kernel path (:data:`THREADED_MIN_WORK`), else on
one. Each crossover is measured by ``benchmarks/thread_crossover.py`` (serial and threaded
alternated over SmolLM2-135M's and Llama-3-8B's matrices at 1-48 tokens), PyTorch's also in
the step (below); the table and its conditions: docs/cpu-kernels.md, "Threads per product".
Re-measure there on another CPU.
"""

from __future__ import annotations

import math

# Kernel paths: the engine's numba loops (decode_jit: ``q4i`` integer q4, ``q4`` float q4,
# ``int8i`` integer int8, ``int8``, ``bf16``, ``fp32``), PyTorch's CPU kernels (``torch``:
# _weight_int8pack_mm, _weight_int4pack_mm_for_cpu, the bf16 matmul; OpenMP intra-op threads),
# prefill's products of a compact matrix (``widen``: its widened tiles split between the
# threads, each widened and multiplied on one, engine/widen.py; else widened on one between
# GEMMs on all). Weight-tokens from which the threaded kernel is used; 0: always, inf: never.
# Measured on the 2-core AMD EPYC Zen 5 (benchmarks/thread_crossover.py, docs/cpu-kernels.md
# "Threads per product"): numba's threads start and join in ~25-50 us, PyTorch's OpenMP
# workers (spinning between regions) in a few, and one core here already reads DRAM at the
# machine's rate, so few-token products gain little from a second one. Re-measured at load
# 1.8-2.9 (23:50 UTC) the script fitted int8 2.7e7, bf16 4.4e6, fp32 1.6e7, from 16-48-token
# products (0.5-0.8x) these loops do not run here; at 1-8 tokens threads lost on SmolLM2's
# layer products (1.1-2.9x) and drew level on the 8B's (0.95-1.1x): the figures below stand.
THREADED_MIN_WORK: dict[str, float] = {
    "q4i": 1.5e8,  # quiet, 2026-12-04 22:19 UTC: 4096x4096 x 8 tokens 0.75 / 0.83 ms
    "q4": 1.5e8,  # the float q4 kernel (CPUs without AVX2): not measured, q4i's figure
    "int8": 4.0e8,
    # the integer int8 kernel: 2026-12-05 01:28 UTC (load 4.3-4.5), threaded / serial 1.4-2.9x on
    # SmolLM2's layer products at 1-8 tokens, 1.0-1.25x on its head and the 8B's (one outlier
    # 0.63): a second core added nothing under that load; the float loop's figure until a quiet run
    "int8i": 4.0e8,
    "bf16": 1.6e7,
    "fp32": 8.5e7,
    # PyTorch's kernels: alone, faster threaded from the smallest product (576x576, 1 token:
    # 24 / 17 us), but in SmolLM2's bf16 step (load 4-5, alternated) always threaded ran
    # batch 8 in 196 ms best, 1,468 median, against 46 / 57 on one thread (batch 32: 235 /
    # 658 against 103 / 108; its head alone threaded, 127 / 143): each region waits for its
    # second thread's time slice. Threaded only where a product is ~10 ms of work or more.
    "torch": 1e9,
    # SmolLM2's 120 prefill products at 128 tokens, ms wall, tiles split / not (fp32 139.5;
    # 2026-12-05 01:32 UTC, load 2.2, alternated, benchmarks/prefill_widen.py --threads 2):
    # q4 140.2 / 135.9, int8 134.7 / 142.8, bf16 136.2 / 136.4: no gain here. (Before the
    # tiles a threaded widening lost: PyTorch's bf16 copy 5-43x, numba's q4 loop 1.02-1.06x.)
    "widen": math.inf,
}


def product_threads(kernel: str, rows: int, cols: int, tokens: int, threads: int) -> int:
    """Threads for one product on ``kernel``'s path (:data:`THREADED_MIN_WORK`): ``threads``
    when rows x cols x tokens reaches its crossover, else 1."""
    if threads <= 1 or rows * cols * tokens < THREADED_MIN_WORK[kernel]:
        return 1
    return threads


def set_torch_threads(torch, threads: int) -> None:
    """PyTorch's intra-op threads on the calling thread (an OpenMP setting per thread), set
    only when it differs (a get costs ~0.04 us, a set ~0.9)."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
