"""Measure this machine as hardware: memory bandwidth and matmul FLOP/s.

Each figure is timed several times; the profile keeps the best run (the
closest to what the silicon can do, as a datasheet peak is) and reports the
median beside it, since other work on a shared machine slows the median. With one
thread each run is timed in the process's CPU time, as the engine's own rates
that ``infercast machine --model`` fits against these peaks are (``rate_probe._times``):
timed by the wall clock, a machine loaded with other work halved the peaks (66 GFLOP/s and
22 GB/s against 138 and 43 quiet, load 4-5, 2026-12-04) while the engine's CPU-time rates
were not, and the fit ended on its bounds, predicting every product 1.2-1.9x too slow.

- Copy bandwidth follows STREAM's convention (McCalpin 1995): a copy of N
  bytes moves 2N bytes (read + write). Every bandwidth kernel streams at least
  twice the last-level cache (and 512 MiB) per pass, so DRAM, not cache, is
  measured: this guest reports a 480 MiB L3 (the host's), and the earlier fixed
  256 MiB working set was partly served from it. Measured here (one thread, best
  of 5, GB/s, read = sdot / matrix-vector): 64 MiB 29.2 / 26.2, 256 MiB 17.5 /
  18.9 (up to 20-21 in other runs), 512 MiB 17.0 / 17.7, 1 GiB 16.9 / 15.6,
  2 GiB 17.1 / 16.8: flat from about the L3 size on, which is where a model's
  weight stream lives (random-1b: 4.4 GB per step).
- Read bandwidth: a float32 dot product of two large arrays (reads only).
- Matrix-vector bandwidth is what a batch-1 decode step does: read a float32
  matrix once (bytes = matrix size).
- The profile's ``memory_bandwidth_bytes_per_s`` is the best read rate (dot or
  matrix-vector): decode is a stream of weight reads, and on these machines one
  core reads DRAM at ~17 GB/s while its STREAM copy figure (~25 GB/s, reads plus
  writes) overstates what it can read. The copy figure is reported beside it.
- Matmul FLOP/s: 2*n^3 floating point operations per n x n x n product; the int8 line: the
  engine's integer q4 and int8 kernels, 2 x weights x tokens operations a product.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits


@dataclass(frozen=True)
class Measured:
    """Median and best of several runs of one rate (units in the name of the field using it)."""

    median: float
    best: float
    runs: int

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "best": self.best, "runs": self.runs}


def _rate(work: float, fn: Callable[[], Any], runs: int, threads: int = 1) -> Measured:
    """``work`` per second of ``fn``: by the process's CPU time with one thread, by the wall
    clock with more."""
    clock = time.process_time if threads == 1 else time.perf_counter
    fn()  # warm up: page faults, BLAS buffers
    rates = []
    for _ in range(runs):
        t0 = clock()
        fn()
        rates.append(work / (clock() - t0))
    return Measured(statistics.median(rates), max(rates), runs)


def _sliced_rate(
    work: float, fn: Callable[..., Any], arrays: tuple[np.ndarray, ...], runs: int, threads: int
) -> Measured:
    """``work`` per second of ``fn(*arrays)``, with more than one thread run as ``threads``
    slices of the arrays at once in a pool (numpy's copy and BLAS's sdot each stay on one
    thread and release the GIL), each slice's BLAS on one thread, as STREAM's OpenMP loop
    splits its arrays."""
    from concurrent.futures import ThreadPoolExecutor

    if threads == 1:
        with threadpool_limits(1):
            return _rate(work, lambda: fn(*arrays), runs)
    bounds = np.linspace(0, arrays[0].size, threads + 1).astype(int)
    parts = [tuple(a[i:j] for a in arrays) for i, j in zip(bounds[:-1], bounds[1:], strict=True)]
    with threadpool_limits(1), ThreadPoolExecutor(threads) as pool:

        def run() -> None:
            list(pool.map(lambda p: fn(*p), parts))

        return _rate(work, run, runs, threads)


def copy_bandwidth(num_bytes: int, runs: int, threads: int) -> Measured:
    """STREAM-style copy bandwidth in bytes/s (2 x bytes copied), ``threads`` slices at once
    (:func:`_sliced_rate`)."""
    src = np.ones(num_bytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    return _sliced_rate(2.0 * src.nbytes, np.copyto, (dst, src), runs, threads)


def matvec_bandwidth(num_bytes: int, runs: int, threads: int) -> Measured:
    """Bytes/s of float32 matrix-vector products (a batch-1 decode's access pattern)."""
    cols = 4096
    mat = np.ones((num_bytes // 4 // cols, cols), dtype=np.float32)
    vec = np.ones(cols, dtype=np.float32)
    with threadpool_limits(threads):
        return _rate(float(mat.nbytes), lambda: mat @ vec, runs, threads)


def read_bandwidth(num_bytes: int, runs: int, threads: int) -> Measured:
    """Read-only bytes/s: a float32 dot product of two arrays (BLAS sdot), ``threads`` slices
    at once.

    OpenBLAS runs sdot on one thread whatever its limit (0.3.x, measured on the Zen 5,
    2026-12-05, quiet: 42.4-42.6 GB/s at one thread, 42.7-43.0 "at two"), which put the
    two-thread decode floor below what a two-thread engine step read (fp32 at 1.32 of it). As
    for :func:`copy_bandwidth`, a thread pool dots one slice per thread, each slice's BLAS on
    one thread (:func:`_sliced_rate`): 53.7-53.9 GB/s on the same two cores.
    """
    a = np.ones(num_bytes // 8, dtype=np.float32)
    b = np.ones_like(a)
    return _sliced_rate(2.0 * a.nbytes, np.dot, (a, b), runs, threads)


def matmul_flops_fp32(n: int, runs: int, threads: int) -> Measured:
    """FLOP/s of an n x n float32 matmul through numpy's BLAS."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    with threadpool_limits(threads):
        return _rate(2.0 * n**3, lambda: a @ b, runs, threads)


def matmul_flops_torch(n: int, runs: int, threads: int, dtype: str) -> Measured | None:
    """FLOP/s of an n x n torch matmul in ``dtype`` (bf16), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    t = getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[dtype])
    a = torch.randn(n, n).to(t)
    b = torch.randn(n, n).to(t)
    return _rate(2.0 * n**3, lambda: a @ b, runs, threads)


def matmul_ops_integer(n: int, tokens: int, runs: int, threads: int) -> dict[str, Measured]:
    """Ops/s (2 x weights x tokens, as FLOPs are counted) of the engine's integer kernels on an
    n x n matrix by ``tokens`` tokens, per format whose prefill runs them on this CPU
    (``qlinear.integer_prefill``: ``q4``, 4-bit groups by int8-quantized activations; ``int8``,
    int8 rows by two 8-bit planes a token), through the engine's own product
    (``matmul_fm``: its token chunks and threads); {} where neither runs.

    The cost model's ``int8`` peak (:func:`probe`): the engine's q4 and int8 products beyond
    ``KERNEL_MAX_TOKENS`` compute in int8 there, 1.6-3.3x the float32 GEMM on the widened matrix
    (``qlinear.INT_PREFILL``), which priced at the float32 peak would need an efficiency above 1.
    """
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return {}
    from infercast.engine.qformats import quantize_q4
    from infercast.engine.qlinear import Int4Matrix, Int8Matrix, Scratch, integer_prefill

    rng = np.random.default_rng(0)
    out = {}
    for fmt in ("q4", "int8"):
        if not integer_prefill(fmt):
            continue
        w = rng.uniform(-0.05, 0.05, (n, n)).astype(np.float32)
        m = Int4Matrix(quantize_q4(w)) if fmt == "q4" else Int8Matrix(w)
        x = rng.standard_normal((n, tokens), dtype=np.float32)
        scratch = Scratch(threads)
        out[fmt] = _rate(
            2.0 * n * n * tokens, lambda m=m, x=x, s=scratch: m.matmul_fm(x, s), runs, threads
        )
    return out


def last_level_cache_bytes() -> int:
    """The largest CPU cache sysfs reports for cpu0, in bytes (32 MiB if unknown)."""
    from pathlib import Path

    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        if text[:-1].isdigit() and text[-1] in units:
            sizes.append(int(text[:-1]) * units[text[-1]])
    return max(sizes, default=32 * 2**20)


def stream_bytes() -> int:
    """Bytes each bandwidth kernel streams per pass: >= 2 x the last-level cache, >= 512 MiB."""
    return max(512 * 2**20, 2 * last_level_cache_bytes())


def memory_bytes() -> float:
    """Physical memory in bytes (pages x page size)."""
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def probe(
    threads: int = 1,
    runs: int = 7,
    bandwidth_bytes: int | None = None,
    matmul_n: int = 1536,
    integer_n: int = 4096,
    integer_tokens: int = 512,
) -> dict[str, Any]:
    """Measure everything; returns a JSON-ready dict that includes a hardware profile.

    ``bandwidth_bytes``: bytes each bandwidth kernel streams per pass (default
    :func:`stream_bytes`: beyond the last-level cache). ``integer_n`` x ``integer_tokens``:
    the integer kernels' product (:func:`matmul_ops_integer`); the faster of the two is the
    ``int8`` peak, where either runs.
    """
    if bandwidth_bytes is None:
        bandwidth_bytes = stream_bytes()
    copy = copy_bandwidth(bandwidth_bytes, runs, threads)
    matvec = matvec_bandwidth(bandwidth_bytes, runs, threads)
    read = read_bandwidth(bandwidth_bytes, runs, threads)
    flops = {"fp32": matmul_flops_fp32(matmul_n, runs, threads)}
    bf16 = matmul_flops_torch(matmul_n, runs, threads, "bf16")
    if bf16 is not None:
        flops["bf16"] = bf16
    integer = matmul_ops_integer(integer_n, integer_tokens, runs, threads)
    if integer:
        flops["int8"] = max(integer.values(), key=lambda m: m.best)
    return {
        "name": f"local-cpu ({platform.processor() or platform.machine()}, {threads} thread(s))",
        "threads": threads,
        "memory_bytes": memory_bytes(),
        # Decode streams weights, so the peak is the best *read* rate; STREAM copy
        # counts reads and writes and overstates what one core can read.
        "memory_bandwidth_bytes_per_s": max(read.best, matvec.best),
        "matmul_flops_per_s": {k: v.best for k, v in flops.items()},
        "measurements": {
            "copy_bandwidth_bytes_per_s": copy.as_dict(),
            "read_bandwidth_bytes_per_s": read.as_dict(),
            "matvec_fp32_bandwidth_bytes_per_s": matvec.as_dict(),
            **{f"matmul_{k}_flops_per_s": v.as_dict() for k, v in flops.items()},
            **{f"matmul_{k}_integer_ops_per_s": v.as_dict() for k, v in integer.items()},
        },
    }


def profile_mapping(result: dict[str, Any]) -> dict[str, Any]:
    """The hardware-profile keys ``load_hardware`` reads (see docs/engine.md)."""
    return {
        "name": "local-cpu",
        "memory_bytes": result["memory_bytes"],
        "memory_bandwidth_bytes_per_s": result["memory_bandwidth_bytes_per_s"],
        "link_bandwidth_bytes_per_s": 0.0,
        "price_per_hour": 0.0,
        "flops_per_s": dict(result["matmul_flops_per_s"]),
    }


def to_toml(profile: dict[str, Any], comment: str) -> str:
    """TOML text of a flat profile with one ``[flops_per_s]`` table (numbers and strings only)."""

    def value(v: Any) -> str:
        return f'"{v}"' if isinstance(v, str) else f"{float(v):.6g}"

    lines = [f"# {line}" for line in comment.splitlines()]
    lines += [f"{k} = {value(v)}" for k, v in profile.items() if not isinstance(v, dict)]
    lines.append("")
    lines.append("[flops_per_s]")
    lines += [f"{k} = {value(v)}" for k, v in profile["flops_per_s"].items()]
    return "\n".join(lines) + "\n"
