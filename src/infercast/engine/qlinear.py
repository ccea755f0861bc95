"""Weight matrices kept in a compact format in memory, multiplied by kernels that read it.

Formats (``serve --weights``): ``fp32`` (numpy arrays, :mod:`infercast.engine.linear`; on
an AVX-512 or AVX2 CPU products of 2 to :func:`fp32_jit_max_tokens` tokens run a numba loop),
``bf16`` (2 bytes a weight), ``int8`` (1 byte a weight plus one scale per row) and
``q4`` (4-bit groups of 32 with a bf16 scale and zero per group: 4.5 bits a weight).
The quantized kernels are PyTorch's CPU weight-only kernels
(``_weight_int4pack_mm_for_cpu``, ``_weight_int8pack_mm``; bf16 activations,
fp32 accumulation), so these formats need the ``torch`` extra. int8 products of
up to :data:`INT8_INT_JIT_MAX_TOKENS` tokens run a numba kernel instead where the CPU has
AVX2 or AVX-512 (:mod:`infercast.engine.decode_jit`: integer dot products of the rows and
the activations quantized to two 8-bit planes, 1.4-2x PyTorch's kernel), elsewhere up to
:func:`int8_jit_max_tokens` a float loop (int8 rows widened in registers, float32
activations), 1.2-2.1x faster than PyTorch's there, and so do bf16 products of up to
:func:`bf16_jit_max_tokens` (each row widened by a shift: 1.4x PyTorch's bf16 matmul at
one token, 4.3x at 8, on a CPU without AVX-512 BF16), and q4 products of up to
:data:`Q4_INT_JIT_MAX_TOKENS` tokens (integer dot products of the stored 4-bit groups and
int8-quantized activations, 1.6-1.9x PyTorch's int4 kernel at 1-48 tokens on AVX-512) or,
on a CPU without AVX2, :data:`Q4_JIT_MAX_TOKENS` (a float loop over the same groups);
PyTorch's kernels remain for when numba is absent (q4 then keeps PyTorch's packing, and only
then: :class:`Int4Matrix`). The choices and their measurements: docs/cpu-kernels.md.

Up to :data:`KERNEL_MAX_TOKENS` tokens a product reads the compressed weights
directly (decode: the step is a stream of weight bytes, so fewer bytes is a
faster step). Beyond it (prefill chunks) the product is compute-bound and
numpy's float32 GEMM runs 2.2x faster than the int4 kernel at 512 tokens
(81 vs 37 GFLOP/s, one thread, 3072 x 576), so the matrix is widened a tile of
rows at a time into a reused float32 buffer and each tile multiplied there
(:mod:`infercast.engine.widen`; q4 from the numba kernels' layout, the weights decode
multiplies). No float32 copy of the model is kept.
"""

from __future__ import annotations

from functools import cache
from typing import Protocol

import numpy as np

from infercast.engine.decode_jit import Q4_ROWS, cpu_flags, int8_int_ok, kernels, q4_layout
from infercast.engine.linear import linear_fm
from infercast.engine.qformats import GROUP, Q4Rows, Q8Rows, Rows, dense, quantize_int8_rows
from infercast.engine.threads import product_threads, set_torch_threads
from infercast.engine.widen import (
    bf16_rows,
    int8_rows,
    q4_blocks,
    q4_layout_blocks,
    q4_layout_rows,
    tiled_product,
)
from infercast.errors import ConfigError

WEIGHT_FORMATS = ("fp32", "bf16", "int8", "q4")
KERNEL_MAX_TOKENS = (
    48  # int4 kernel vs widen+GEMM crossover: 4.9 vs 5.1 ms at 32, 13.5 vs 9.2 at 128
)
PACK_PAD = 64  # rows padded to a multiple of this before packing: whole blocks on any CPU
TILE_GRANULE = 16  # int8 and bf16 prefill tiles are a multiple of this many rows (widen.py)
# int8 products of up to this many tokens run the numba kernel, beyond it PyTorch's int8 kernel
# up to KERNEL_MAX_TOKENS (then widen + OpenBLAS): where PyTorch runs its AVX2 kernels
# (the Zen 3), 100m's chain of products, ms, one thread, torch's int8 kernel / numba:
# 1 token 12.9 / 6.1, 8 38.3 / 21.7, 16 68.2 / 51.0, 32 132 / 106, 48 191 / 159.
INT8_JIT_MAX_TOKENS = KERNEL_MAX_TOKENS
# Where it runs its AVX-512 kernels (the Zen 5, 2026-12-04, load 4-6, alternated in one run):
# SmolLM2-135M's chain of 120 products, ms CPU, one thread, numba / torch / widen + OpenBLAS:
# 8 tokens 12.1 / 13.7 / 52.8, 10 17.3 / 17.3 / 59.9, 12 24.7 / 19.0, 16 31.0 / 24.9,
# 24 88.0 / 37.8, 32 120 / 50.2 / 93.3, 48 173 / 75.1 / 121.
INT8_JIT_MAX_TOKENS_AVX512 = 8
# The integer int8 kernel (decode_jit.int8_int_kernels, where decode_jit.int8_int_ok) runs every
# product up to KERNEL_MAX_TOKENS: SmolLM2-135M's 120 layer products, ms CPU, one thread, Zen 5
# (vnni512), 2026-12-05 01:14 UTC, load ~3.8, alternated in one process (benchmarks/
# int8_products.py), integer / float loop / PyTorch: 1 token 3.4 / 3.8 / 6.7, 4 5.3 / 8.4 / 7.6,
# 8 9.4 / 17.3 / 13.0, 16 18.0 / 37.9 / 23.7, 32 33.9 / 122 / 45.1, 48 47.5 / 173 / 65.9; at
# 01:41 (load ~5.8, prefetch for a group's first token only) 8 7.8 / 17.4 / 13.2, 48 41.8 / 175
# / 66.3.
INT8_INT_JIT_MAX_TOKENS = KERNEL_MAX_TOKENS
# bf16 products of up to this many tokens run the numba loop on a CPU with AVX-512 BF16
# (native bf16 dot products: ``avx512_bf16`` in /proc/cpuinfo), PyTorch's bf16 matmul beyond
# it up to KERNEL_MAX_TOKENS; elsewhere the loop runs up to KERNEL_MAX_TOKENS (PyTorch's bf16
# matmul ran 171 ms against the loop's 40 at 8 tokens on the AVX2 Zen 3). On the Zen 5,
# 2026-12-04 (load 4-5, alternated in one run), SmolLM2-135M's chain of 120 products, ms CPU,
# one thread, numba / torch: 1 token 7.8 / 14.7, 4 10.7 / 16.3, 5 21.8 / 16.7, 8 19.8 / 18.4,
# 16 57.7 / 21.6, 32 115 / 31.6, 48 175 / 39.4.
BF16_JIT_MAX_TOKENS_NATIVE = 4
# q4 products of up to this many tokens run the float numba kernel over the stored 4-bit groups
# (decode_jit.q4_matmul, where the CPU has no integer kernel), beyond it widened tiles of its
# layout + OpenBLAS (no PyTorch packing is kept where numba runs). SmolLM2-135M's chain of 120
# products, ms CPU, one thread, Zen 5, 2026-12-05 03:35 UTC, load 1.7-2.5, alternated in one
# process (benchmarks/q4_products.py --float), float kernel / widen / PyTorch's int4 kernel:
# 1 token 4.0 / 14.5 / 4.0, 2 12.9 / 26.4 / 4.4, 3 20.3 / 35.5 / 5.3, 4 17.5 / 31.8 / 6.0,
# 8 34.3 / 32.0 / 11.0, 16 59.0 / 44.6 / 20.7, 48 159 / 91.2 / 56.2. (On the AVX2 Zen 3 the
# kernel's step against PyTorch's: batch 1 15.5 / 28.2, 2 31.1 / 34.5, 4 48.6 / 45.9 ms.)
Q4_JIT_MAX_TOKENS = 4
# The same for the integer q4 kernel (decode_jit.q4_int_kernels, where decode_jit.q4_isa finds
# one): faster than PyTorch's int4 kernel at every size up to KERNEL_MAX_TOKENS. SmolLM2-135M's
# chain of 120 products, ms CPU, one thread, Zen 5 (vnni512), 2026-12-04 20:38 UTC, load ~8,
# alternated in one process, numba / PyTorch: 1 token 2.8 / 5.3, 2 3.8 / 6.3, 4 5.3 / 8.2,
# 8 8.5 / 13.8, 16 15.4 / 25.0, 32 29.6 / 48.8, 48 42.3 / 74.8 (docs/cpu-kernels.md). It also
# beats widened tiles + OpenBLAS beyond 48 (numba / PyTorch / widen, 2026-12-05 03:34, load
# 1.9-2.2, benchmarks/q4_products.py: 49 31.3 / 58.9 / 103, 64 41.2 / 74.0 / 119, 128 86.9 /
# 147 / 216), but its activations are int8 planes, and KERNEL_MAX_TOKENS is where the cost
# model's profile splits its two GEMM curves (engine/profile_fit.py): 48 stays, for now.
Q4_INT_JIT_MAX_TOKENS = 48
# q4 and int8 products of more than KERNEL_MAX_TOKENS tokens (prefill) run the integer kernel
# where this CPU has one (:func:`integer_prefill`), every token count: it beats widened tiles +
# OpenBLAS at 49-2048 tokens. SmolLM2-135M's chain of 120 products, ms CPU, one thread, Zen 5
# (vnni512), 2026-12-05 03:57 UTC, load 2.1, alternated (benchmarks/int_prefill.py), integer /
# widen: q4 49 tokens 32.2 / 106, 128 88.7 / 221, 512 493 / 809; int8 49 38.8 / 94.4, 128 104 /
# 208, 512 452 / 788; the 8B's 4096x4096, 14336x4096 and 4096x14336 at 512: q4 384 / 1,131,
# int8 501 / 1,151. Two threads at 512 (wall, load ~2): q4 472 / 435, int8 448 / 461.
# False: widened tiles beyond KERNEL_MAX_TOKENS on every CPU (the cost model then prices these
# formats at the fp32 peak: engine/predict.py).
INT_PREFILL = True
# ... on the integer kernel variants (decode_jit.q4_isa) measured to beat the widened tiles.
# Not AVX2's (vpmaddubsw + vpmaddwd on 256 bits, no VNNI): on the AVX2 Zen 2, 2026-12-05 05:00
# UTC, load 0.6 (benchmarks/int_prefill.py --tokens 64,128,512 --threads 1 --rounds 2), ms CPU
# integer / widen, q4 64 tokens 239 / 191, 128 493 / 332, 512 2,144 / 1,183; int8 324 / 170,
# 654 / 305, 2,806 / 1,141 (integer 51-57 and 39-42 GOP/s, OpenBLAS's fp32 99 GFLOP/s). bw512
# (AVX-512BW without VNNI) is not measured: widened tiles there too.
INT_PREFILL_ISAS = frozenset({"vnni512"})
# ... in chunks of at most this many tokens: one product of 1,024 tokens ran at the widened
# tiles' time (q4, SmolLM2's chain: 1,739 / 1,694 ms; 2,048: 3,407 / 3,238), the kernel's rate
# falling from 306 G/s at 128 tokens to 221 at 512 and 125 at 1,024 (2 x weights x tokens per
# CPU second, same run as above).
INT_PREFILL_CHUNK_TOKENS = 128
# True: q4 in PyTorch's packing and int4 kernel even where numba runs (the path without numba; a
# switch for old-vs-new benchmarks, as decode_jit.Q4_INT).
Q4_TORCH = False
# fp32 products of 2 to this many tokens run the numba loop (decode_jit.fp32_matmul) on a CPU
# with AVX-512 (``avx512f``) or AVX2, OpenBLAS's row-blocked products elsewhere (engine/linear.py).
# SmolLM2-135M's chain of 120 products, ms CPU, one thread, linear_fm / numba, alternated in one
# run. Zen 5, 2026-12-04 (load 3-4): 1 token 13.3 / 12.4, 2 41.7 / 16.2, 4 44.8 / 21.8, 8 41.6 /
# 32.1, 12 52.2 / 43.5, 16 63.6 / 60.4; its decode step (engine_vs_llamacpp.py steps --weights
# fp32-blas,fp32): batch 2 56.5 / 26.3, 4 62.2 / 31.3, 8 67.6 / 52.1. AVX2 Zen 2, 2026-12-05
# 05:10 UTC (load ~1, numpy 2's OpenBLAS): 1 27.0 / 27.0, 2 56.9 / 30.4, 4 63.1 / 34.4, 8 77.9 /
# 43.6, 16 108 / 83.5 (on an AVX2 Zen 3 earlier, 2-4 tokens had cost OpenBLAS about one token's
# time: docs/history/engine-weight-formats.md).
FP32_JIT_MAX_TOKENS = 8


def integer_prefill(fmt: str) -> bool:
    """Whether ``fmt``'s products of more than :data:`KERNEL_MAX_TOKENS` tokens run the integer
    kernel on this CPU (:data:`INT_PREFILL`, numba and an integer variant in
    :data:`INT_PREFILL_ISAS`, ``decode_jit.q4_isa``; q4 in the numba layout, int8 matrices
    whose columns ``decode_jit.int8_int_ok`` accepts), so their matmuls compute in int8, not
    float32."""
    from infercast.engine import decode_jit

    if not INT_PREFILL or kernels() is None or decode_jit.q4_isa() not in INT_PREFILL_ISAS:
        return False
    if fmt == "q4":
        return decode_jit.Q4_INT and not Q4_TORCH
    return fmt == "int8" and decode_jit.INT8_INT


def _token_chunks(call, x_rows: np.ndarray, out: np.ndarray) -> None:
    """``call(x_rows, out)`` on chunks of at most :data:`INT_PREFILL_CHUNK_TOKENS` tokens
    (``x_rows`` [T, K], ``out`` [N, T])."""
    t = x_rows.shape[0]
    if t <= INT_PREFILL_CHUNK_TOKENS:
        call(x_rows, out)
        return
    for c0 in range(0, t, INT_PREFILL_CHUNK_TOKENS):
        c1 = min(t, c0 + INT_PREFILL_CHUNK_TOKENS)
        part = np.empty((out.shape[0], c1 - c0), dtype=np.float32)
        call(x_rows[c0:c1], part)
        out[:, c0:c1] = part


def resolve_weights(weights: str) -> str:
    """Check a ``--weights`` value; ``auto`` without torch (the compact kernels' extra) means
    fp32."""
    import importlib.util

    if weights not in ("auto", *WEIGHT_FORMATS):
        raise ConfigError(f"`weights` {weights!r}: use auto or one of {', '.join(WEIGHT_FORMATS)}")
    if weights == "auto" and importlib.util.find_spec("torch") is None:
        return "fp32"
    return weights


@cache
def packing_block() -> int:
    """Rows per block of PyTorch's CPU int4 packing on this CPU (32 or 64).

    ``_convert_weight_to_int4pack_for_cpu`` (PyTorch 2.13,
    aten/src/ATen/native/cpu/int4mm_kernel.cpp) packs blocks of BLOCK_N rows column by
    column: for column k, BLOCK_N / 2 bytes whose low nibbles are the block's first half
    of rows and high nibbles its second half. BLOCK_N is 64 where PyTorch runs its AVX-512
    kernels and 32 elsewhere: found by packing row numbers, 64 on this project's AVX-512
    Zen 5 (2026-12-04), 32 on the AVX2 Zen 3 the engine was first written for; a partial
    last block is packed differently, hence :data:`PACK_PAD`. Found here the same way:
    row r holds r // 16 everywhere, so the first byte's high nibble says which row shares
    it with row 0.
    """
    torch = import_torch()
    q = np.repeat((np.arange(PACK_PAD) // 16)[:, None], 2 * GROUP, axis=1).astype(np.int32)
    first = int(torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(q), 1)[0, 0])
    block = {0x10: 32, 0x20: 64}.get(first)
    if block is None:
        raise ConfigError(f"PyTorch's int4 packing is not one the engine reads (byte {first:#x})")
    return block


@cache
def int8_jit_max_tokens() -> int:
    """The most tokens an int8 product runs the numba loop for on this CPU: PyTorch's int8
    kernel is the faster beyond 8 where ATen dispatches its AVX-512 kernels
    (``torch.backends.cpu.get_cpu_capability()``), beyond 48 elsewhere (measured above)."""
    torch = import_torch()
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    return INT8_JIT_MAX_TOKENS_AVX512 if avx512 else INT8_JIT_MAX_TOKENS


@cache
def bf16_jit_max_tokens() -> int:
    """The most tokens a bf16 product runs the numba loop for on this CPU: 4 with native bf16
    dot products (AVX-512 BF16), where PyTorch's bf16 matmul is the faster beyond, else 48."""
    native = "avx512_bf16" in cpu_flags()
    return BF16_JIT_MAX_TOKENS_NATIVE if native else KERNEL_MAX_TOKENS


@cache
def fp32_jit_max_tokens() -> int:
    """The most tokens an fp32 product runs the numba loop for on this CPU (from 2): with
    AVX-512 (``avx512f``) or AVX2, where OpenBLAS took 1.8-3.9x one token's time for 2-8
    (measured above, :data:`FP32_JIT_MAX_TOKENS`); elsewhere 1, i.e. never: the row-blocked
    OpenBLAS products stay."""
    return FP32_JIT_MAX_TOKENS if cpu_flags() & {"avx512f", "avx2"} else 1


def import_torch():
    """torch, or a ConfigError that says how to install it."""
    try:
        import torch
    except ImportError:
        raise ConfigError(
            "bf16/int8/q4 weights need torch: pip install 'infercast[torch]' "
            "(or serve with `weights` fp32)"
        ) from None
    return torch


class Scratch:
    """Reusable float32 buffers, one per thread (each grows to the largest tile widened in a
    step), the threads a product may use (each product takes 1 or all: engine/threads.py),
    and the pool of the other threads, started on first use (:func:`widen.tiled_product`)."""

    def __init__(self, threads: int = 1) -> None:
        self._bufs = [np.empty(0, dtype=np.float32) for _ in range(max(1, threads))]
        self.threads = threads
        self._pool = None

    def __call__(self, i: int, n: int) -> np.ndarray:
        """Thread i's buffer of at least n float32 values (1-D)."""
        if self._bufs[i].size < n:
            self._bufs[i] = np.empty(n, dtype=np.float32)
        return self._bufs[i]

    def get(self, shape: tuple[int, int]) -> np.ndarray:
        return self(0, shape[0] * shape[1])[: shape[0] * shape[1]].reshape(shape)

    @property
    def pool(self):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max(1, self.threads - 1), "infercast-widen")
        return self._pool


class QuantMatrix(Protocol):
    """What the forward pass needs from a non-float32 weight matrix [out, in]."""

    fmt: str
    shape: tuple[int, int]
    nbytes: int

    def matmul_fm(self, x: np.ndarray, scratch: Scratch) -> np.ndarray: ...

    def rows(self, ids: np.ndarray) -> np.ndarray: ...

    def dequantize(self) -> np.ndarray: ...


def _to_torch_rows(x: np.ndarray, torch, dtype):
    """Feature-major float32 [K, T] -> token-major [T, K] torch tensor of ``dtype``.

    One token: a reshape, not ``x.T``, whose [1, K] view has strides (1, 1) that
    torch keeps through ``.to``; a bf16 matmul on that layout took a slow path
    (3072 x 576, one thread: 1.3-1.7 ms against 0.39-0.44 ms; the int4 and int8
    kernels ran the same either way).
    """
    return torch.from_numpy(x.reshape(1, -1) if x.shape[1] == 1 else np.ascontiguousarray(x.T)).to(
        dtype
    )


def _from_torch_fm(y, n: int) -> np.ndarray:
    """Token-major torch [T, N'] -> feature-major float32 [n, T] (C-contiguous)."""
    out = y.float().numpy()
    if out.shape[1] != n:  # padded rows of the int4 packing
        out = out[:, :n]
    return np.ascontiguousarray(out.T)


def torch_int4_packing(rows: Q4Rows):
    """PyTorch's CPU int4 packing of ``rows`` (``_convert_weight_to_int4pack_for_cpu``; rows
    padded to :data:`PACK_PAD`) and its [G, N', 2] scales and zeros rounded to bf16, the
    operands of ``_weight_int4pack_mm_for_cpu``."""
    torch = import_torch()
    pad = -rows.shape[0] % PACK_PAD  # the packing works in blocks of 32 or 64 rows: zero rows
    q = np.pad(rows.q, ((0, pad), (0, 0))).astype(np.int32)
    sz = np.stack(
        [np.pad(rows.scale, ((0, pad), (0, 0))).T, np.pad(rows.zero, ((0, pad), (0, 0))).T],
        axis=-1,
    )  # [G, N', 2]
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(q), 1)
    return packed, torch.from_numpy(np.ascontiguousarray(sz, dtype=np.float32)).to(torch.bfloat16)


class Int4Matrix:
    """``q4``: 4-bit groups of 32 with a scale and an offset per group (``w = q d + m``).

    Where numba runs, only the numba kernels' layout is kept (``jit_layout``,
    ``decode_jit.q4_layout``: the integer kernel's fp16 d and m, the float one's float32, the
    file's exact values either way for Q4_0/Q4_1): its kernel runs products of up to
    :data:`Q4_INT_JIT_MAX_TOKENS` (integer) or :data:`Q4_JIT_MAX_TOKENS` (float) tokens, and
    larger ones widen tiles of it to float32 for OpenBLAS (``widen.q4_layout_blocks``), so
    prefill and decode multiply the same weights, and embedding rows come from it too.
    Without numba (or with :data:`Q4_TORCH`), PyTorch's CPU int4 packing with its scales and
    zeros rounded to bf16 (~1e-2 relative) and ``_weight_int4pack_mm_for_cpu`` up to
    :data:`KERNEL_MAX_TOKENS`, widened tiles of that packing beyond.
    """

    fmt = "q4"

    def __init__(self, rows: Q4Rows) -> None:
        self._torch = import_torch()
        n, k = rows.shape
        if k % GROUP:
            raise ConfigError(f"q4 needs columns in groups of {GROUP}; a {n}x{k} matrix has not")
        self.shape = (n, k)
        self.jit_layout = None
        self.packed = None
        if kernels() is not None and not Q4_TORCH:
            self.jit_layout = q4_layout(rows.q, rows.scale, rows.zero - 8.0 * rows.scale)
            return
        torch = self._torch
        self.packed, self.sz = torch_int4_packing(rows)
        sz32 = self.sz.float().numpy()  # the rounded values the kernel uses
        self.scale_t, self.zero_t = (
            np.ascontiguousarray(sz32[..., 0]),
            np.ascontiguousarray(sz32[..., 1]),
        )
        half = packing_block() // 2  # the packing by block, as the widening reads it
        self._blocks = self.packed.numpy().reshape(-1, k, half)
        self._scale_b, self._zero_b = (
            a.reshape(k // GROUP, -1, 2, half) for a in (self.scale_t, self.zero_t)
        )
        self._kernel = torch.ops.aten._weight_int4pack_mm_for_cpu  # looked up once, not per call

    @property
    def nbytes(self) -> int:
        """Bytes held, and read by a decode step: the numba layout, or PyTorch's packing."""
        if self.jit_layout is not None:
            return int(sum(a.nbytes for a in self.jit_layout))
        return int(self.packed.nbytes + self.sz.nbytes)

    def matmul_fm(self, x: np.ndarray, scratch: Scratch) -> np.ndarray:
        """w @ x for feature-major x [K, T] -> [N, T] float32."""
        n, k = self.shape
        t = x.shape[1]
        if self.jit_layout is None:
            return self._torch_product(x, scratch)
        # (qv,): the integer kernel (decode_jit.q4_isa); (qt, d, m): the float one
        integer = len(self.jit_layout) == 1
        limit = Q4_INT_JIT_MAX_TOKENS if integer else Q4_JIT_MAX_TOKENS
        if t > limit and not (integer and integer_prefill("q4")):
            threads = product_threads("widen", n, k, t, scratch.threads)
            return tiled_product(self._widen, self.shape, Q4_ROWS, x, scratch, threads)
        out = np.empty((self.jit_layout[0].shape[0] * Q4_ROWS, t), dtype=np.float32)
        fmt = "q4i" if integer else "q4"
        threads = product_threads(fmt, n, k, t, scratch.threads)
        kernel = kernels().product(fmt, threads)
        x_rows = x.reshape(1, -1) if t == 1 else x.T.copy()
        _token_chunks(lambda xr, o: kernel(*self.jit_layout, xr, o, threads), x_rows, out)
        return out[:n] if out.shape[0] != n else out

    def _torch_product(self, x: np.ndarray, scratch: Scratch) -> np.ndarray:
        n, k = self.shape
        t = x.shape[1]
        if t > KERNEL_MAX_TOKENS:
            threads = product_threads("widen", n, k, t, scratch.threads)
            return tiled_product(self._widen, self.shape, packing_block(), x, scratch, threads)
        torch = self._torch
        set_torch_threads(torch, product_threads("torch", n, k, t, scratch.threads))
        y = self._kernel(_to_torch_rows(x, torch, torch.bfloat16), self.packed, GROUP, self.sz)
        return _from_torch_fm(y, n)

    def _widen(self, r0: int, r1: int, buf: np.ndarray) -> np.ndarray:
        """Rows r0 .. r1 - 1 (r0 on a block of the layout) widened in ``buf``: a [r1 - r0, K]
        view (of w transposed)."""
        k = self.shape[1]
        if self.jit_layout is not None:
            c0, c1 = r0 // Q4_ROWS, -(-r1 // Q4_ROWS)
            wt = buf[: k * (c1 - c0) * Q4_ROWS].reshape(k, (c1 - c0) * Q4_ROWS)
            q4_layout_blocks(self.jit_layout, c0, wt)
            return wt[:, : r1 - r0].T
        blk = 2 * self._blocks.shape[2]
        c0, c1 = r0 // blk, -(-r1 // blk)
        wt = buf[: k * (c1 - c0) * blk].reshape(k, c1 - c0, 2, blk // 2)
        q4_blocks(self._blocks, self._scale_b, self._zero_b, c0, wt)
        return wt.reshape(k, -1)[:, : r1 - r0].T

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Dequantized rows ``ids`` [T] -> [T, K] float32 (an embedding lookup)."""
        k = self.shape[1]
        if self.jit_layout is not None:  # one compiled call (~3 us a token)
            out = np.empty((len(ids), k), dtype=np.float32)
            q4_layout_rows(self.jit_layout, np.asarray(ids, dtype=np.int64), out)
            return out
        blk = packing_block()
        blocks = self.packed.numpy().reshape(-1, k, blk // 2)  # [N'/blk, K, blk/2]
        within = ids % blk
        byte = blocks[ids // blk, :, within % (blk // 2)]  # [T, K]
        q = np.where((within < blk // 2)[:, None], byte & 15, byte >> 4).astype(np.float32) - 8.0
        g = np.arange(k) // GROUP
        # Pick the tokens' columns first: scale_t[g] would widen all N' rows (113 MB for
        # SmolLM2's vocabulary: 170 ms of a 174 ms decode step).
        return q * self.scale_t[:, ids].T[:, g] + self.zero_t[:, ids].T[:, g]

    def dequantize(self) -> np.ndarray:
        n, k = self.shape
        if self.jit_layout is not None:
            wt = np.empty((k, self.jit_layout[0].shape[0] * Q4_ROWS), dtype=np.float32)
            q4_layout_blocks(self.jit_layout, 0, wt)
        else:
            wt = np.empty((k, self.packed.shape[0]), dtype=np.float32)
            widen_int4(self.packed.numpy(), self.scale_t, self.zero_t, wt)
        return np.ascontiguousarray(wt.T[:n])


class Int8Matrix:
    """``int8``: symmetric int8 per output row with a bf16 scale (``_weight_int8pack_mm``)."""

    fmt = "int8"

    def __init__(self, w: Rows) -> None:
        torch = self._torch = import_torch()
        q, s = quantize_int8_rows(dense(w))
        self.q = torch.from_numpy(q)
        self.q_np = q
        self.s = torch.from_numpy(s).to(torch.bfloat16)
        self.s32 = self.s.float().numpy()
        self.ws = q.sum(axis=1, dtype=np.int32)  # each row's sum: the integer kernel's offset
        self.shape = q.shape
        self.nbytes = int(self.q.nbytes + self.s.nbytes)

    def matmul_fm(self, x: np.ndarray, scratch: Scratch) -> np.ndarray:
        t = x.shape[1]
        n, k = self.shape
        jit = kernels()
        # integer dot products (decode_jit.int8_int_kernels) where this CPU and K allow them,
        # else each weight widened to float32
        integer = jit is not None and jit.int8i_matmul is not None and int8_int_ok(k)
        if t > KERNEL_MAX_TOKENS and not (integer and integer_prefill("int8")):
            threads = product_threads("widen", n, k, t, scratch.threads)
            return tiled_product(self._widen, self.shape, TILE_GRANULE, x, scratch, threads)
        if (
            integer
            and (t <= INT8_INT_JIT_MAX_TOKENS or integer_prefill("int8"))
            or (jit is not None and not integer and t <= int8_jit_max_tokens())
        ):
            out = np.empty((n, t), dtype=np.float32)
            threads = product_threads("int8i" if integer else "int8", n, k, t, scratch.threads)
            x_rows = x.reshape(1, -1) if t == 1 else x.T.copy()
            if integer:
                kernel = jit.product("int8i", threads)
                _token_chunks(
                    lambda xr, o: kernel(self.q_np, self.ws, self.s32, xr, o, threads), x_rows, out
                )
            else:
                jit.product("int8", threads)(self.q_np, self.s32, x_rows, out)
            return out
        torch = self._torch
        set_torch_threads(torch, product_threads("torch", n, k, t, scratch.threads))
        y = torch.ops.aten._weight_int8pack_mm(
            _to_torch_rows(x, torch, torch.bfloat16), self.q, self.s
        )
        return _from_torch_fm(y, self.shape[0])

    def _widen(self, r0: int, r1: int, buf: np.ndarray) -> np.ndarray:
        w = buf[: (r1 - r0) * self.shape[1]].reshape(r1 - r0, self.shape[1])
        int8_rows(self.q_np, self.s32, r0, w)
        return w

    def rows(self, ids: np.ndarray) -> np.ndarray:
        return self.q.numpy()[ids].astype(np.float32) * self.s32[ids, None]

    def dequantize(self) -> np.ndarray:
        return self.q.numpy().astype(np.float32) * self.s32[:, None]


class Bf16Matrix:
    """``bf16``: bfloat16 weights (float32 rounded to nearest even), torch matmul."""

    fmt = "bf16"

    def __init__(self, w: Rows) -> None:
        torch = self._torch = import_torch()
        self.w = torch.from_numpy(np.ascontiguousarray(dense(w), dtype=np.float32)).to(
            torch.bfloat16
        )
        self.shape = tuple(self.w.shape)
        self.nbytes = int(self.w.nbytes)
        self.bits = self.w.view(torch.int16).numpy().view(np.uint16)  # the same bytes

    def matmul_fm(self, x: np.ndarray, scratch: Scratch) -> np.ndarray:
        n, k = self.shape
        torch = self._torch
        t = x.shape[1]
        if t > KERNEL_MAX_TOKENS:
            threads = product_threads("widen", n, k, t, scratch.threads)
            return tiled_product(self._widen, self.shape, TILE_GRANULE, x, scratch, threads)
        jit = kernels()
        if jit is not None and t <= bf16_jit_max_tokens():  # float32 activations
            out = np.empty((n, t), dtype=np.float32)
            kernel = jit.product("bf16", product_threads("bf16", n, k, t, scratch.threads))
            kernel(self.bits, x.reshape(1, -1) if t == 1 else x.T.copy(), out)
            return out
        set_torch_threads(torch, product_threads("torch", n, k, t, scratch.threads))
        y = _to_torch_rows(x, torch, torch.bfloat16) @ self.w.T
        return _from_torch_fm(y, n)

    def _widen(self, r0: int, r1: int, buf: np.ndarray) -> np.ndarray:
        w = buf[: (r1 - r0) * self.shape[1]].reshape(r1 - r0, self.shape[1])
        bf16_rows(self.bits, r0, w)
        return w

    def rows(self, ids: np.ndarray) -> np.ndarray:
        # bf16 is float32's top half: the rows' bits shifted up (numpy: ~5 us a decode token,
        # where torch's index and .float() took ~85 us)
        return (self.bits[ids].astype(np.uint32) << np.uint32(16)).view(np.float32)

    def dequantize(self) -> np.ndarray:
        return self.w.float().numpy()


def to_format(w: Rows, fmt: str) -> np.ndarray | QuantMatrix:
    """A matrix in ``fmt`` (``fp32`` is a float32 array; Q4 from float32 is quantized here)."""
    if fmt == "fp32":
        return np.ascontiguousarray(dense(w), dtype=np.float32)
    if fmt == "bf16":
        return Bf16Matrix(w)
    if fmt == "int8":
        return Int8Matrix(w)
    if fmt == "q4":
        from infercast.engine.qformats import quantize_q4

        return Int4Matrix(w if isinstance(w, Q4Rows) else quantize_q4(dense(w)))
    raise ConfigError(f"`weights` {fmt!r}: use one of {', '.join(WEIGHT_FORMATS)}")


def native_format(w: Rows) -> str:
    """The format that keeps a loaded matrix as stored: Q4 blocks -> q4, Q8 blocks -> int8."""
    if isinstance(w, Q4Rows):
        return "q4"
    if isinstance(w, Q8Rows):
        return "int8"
    return "fp32"


def matmul_fm(w: np.ndarray | QuantMatrix, x: np.ndarray, scratch: Scratch) -> np.ndarray:
    """w [out, in] @ feature-major x [in, T] -> [out, T] float32, in any format."""
    if isinstance(w, np.ndarray):
        t = x.shape[1]
        if 2 <= t <= fp32_jit_max_tokens() and (jit := kernels()) is not None:
            n, k = w.shape
            out = np.empty((n, t), dtype=np.float32)
            jit.product("fp32", product_threads("fp32", n, k, t, scratch.threads))(
                w, x.T.copy(), out
            )
            return out
        return linear_fm(w, x)
    return w.matmul_fm(x, scratch)


def embed_rows(w: np.ndarray | QuantMatrix, ids: np.ndarray) -> np.ndarray:
    """Rows ``ids`` of an embedding matrix as float32 [T, H]."""
    return w[ids] if isinstance(w, np.ndarray) else w.rows(ids)


def matrix_nbytes(w: np.ndarray | QuantMatrix) -> int:
    return int(w.nbytes)


def widen_int4(
    packed: np.ndarray, scale_t: np.ndarray, zero_t: np.ndarray, out_t: np.ndarray
) -> None:
    """Dequantize PyTorch-packed int4 [N', K/2] into float32 ``out_t`` [K, N'] (w transposed).

    The packing stores each block of B rows (:func:`packing_block`) k-major: for
    column k, B/2 bytes whose low nibbles are the block's first B/2 rows and high
    nibbles the rest (checked in tests), so w.T comes out in contiguous runs.
    """
    k, n = out_t.shape
    half = packing_block() // 2
    sz = (a.reshape(k // GROUP, -1, 2, half) for a in (scale_t, zero_t))
    q4_blocks(packed.reshape(-1, k, half), *sz, 0, out_t.reshape(k, -1, 2, half))
