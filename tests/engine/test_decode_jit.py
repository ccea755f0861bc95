"""The compiled decode attention and one-token norm equal the numpy path they replace."""

from __future__ import annotations

import re

import numpy as np
import pytest

from infercast.engine.config import named_config
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.model import SeqInput, StepPlan, attend

pytest.importorskip("numba", reason="the compiled kernels need numba (the torch extra)")


@pytest.mark.parametrize("head_dim", [16, 12])
def test_compiled_decode_attention_equals_numpy_groups(head_dim):
    """Uneven contexts (1-40 keys), scattered and descending block tables, GQA (Hq > Hkv)
    and a prefill chunk in the same step: both paths give the same output; head size 16 runs
    the vector tiles (engine/attention_ir.py), 12 the scalar loops."""
    import dataclasses

    from infercast.engine.decode_jit import kernels

    assert kernels() is not None
    cfg = dataclasses.replace(named_config("tiny"), head_dim=head_dim)
    assert cfg.num_heads > cfg.num_kv_heads
    rng = np.random.default_rng(3)
    kv = PagedKVStore(cfg, 96, 4)
    for a in kv.k + kv.v:
        a[:] = rng.standard_normal(a.shape, dtype=np.float32)
    lengths = (1, 2, 3, 9, 10, 33, 40)
    tables = [list(range(12 * i, 12 * i + 12))[::-1] for i in range(len(lengths))]
    tables[3] = [50, 20, 51, 21, 52, 22, 53, 23, 54, 55, 56, 57]
    seqs = [SeqInput([1], n, t) for n, t in zip(lengths, tables, strict=True)]
    seqs.insert(2, SeqInput([1] * 5, 0, list(range(84, 96))))
    t = len(seqs) - 1 + 5
    d = cfg.head_dim
    q = rng.standard_normal((cfg.num_heads, d, t), dtype=np.float32)
    k, v = (rng.standard_normal((cfg.num_kv_heads, d, t), dtype=np.float32) for _ in "kv")
    group = cfg.num_heads // cfg.num_kv_heads
    jit_plan = StepPlan.build(seqs, kv, group, jit=True)
    numpy_plan = StepPlan.build(seqs, kv, group, jit=False)
    assert jit_plan.decode_slots is not None and not jit_plan.decode
    assert numpy_plan.decode_slots is None and len(numpy_plan.decode) > 1
    got, want = attend(0, q, k, v, jit_plan, kv), attend(0, q, k, v, numpy_plan, kv)
    assert np.abs(got - want).max() < 1e-5
    assert np.abs(want).max() > 0.1  # not trivially zero


def test_one_token_norm_equals_the_batched_formula():
    from infercast.engine.decode_jit import kernels
    from infercast.engine.model import rms_norm

    rng = np.random.default_rng(4)
    x = rng.standard_normal((576, 2), dtype=np.float32) * 3
    gain = rng.standard_normal(576, dtype=np.float32)
    one = kernels().rms_norm_one(np.ascontiguousarray(x[:, 0]), gain, 1e-5)
    assert one.shape == (576, 1)
    assert np.allclose(one, rms_norm(x, gain, 1e-5)[:, :1], rtol=1e-5, atol=1e-6)
    assert np.allclose(rms_norm(x[:, :1].copy(), gain, 1e-5), one)


@pytest.mark.parametrize("tokens", [1, 4, 7, 48])
def test_int8_products_of_few_tokens_run_the_compiled_kernel_exactly(tokens, monkeypatch):
    """Up to int8_jit_max_tokens() (48 where PyTorch runs AVX2 kernels, as set here) the int8
    product is the numba loop with float32 activations: the dequantized matrix's product to
    float32 rounding (PyTorch's kernel, with bf16 activations, is ~1e-2 off)."""
    pytest.importorskip("torch", reason="Int8Matrix needs the torch extra")
    import infercast.engine.qlinear as ql
    from infercast.engine.qlinear import Int8Matrix, Scratch

    monkeypatch.setattr(ql, "int8_jit_max_tokens", lambda: ql.INT8_JIT_MAX_TOKENS)
    rng = np.random.default_rng(5)
    w = Int8Matrix(rng.standard_normal((96, 160), dtype=np.float32))
    x = rng.standard_normal((160, tokens), dtype=np.float32)
    got = w.matmul_fm(x, Scratch())
    want = w.dequantize() @ x
    assert got.shape == (96, tokens) and got.flags.c_contiguous
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("tokens", [1, 6, 48])
def test_bf16_products_run_the_compiled_kernel_exactly(tokens, monkeypatch):
    """bf16 products up to bf16_jit_max_tokens() (48 on a CPU without AVX-512 BF16, as set
    here): the numba loop over the bf16 bits with float32 activations equals the widened
    matrix's product to float32 rounding."""
    pytest.importorskip("torch", reason="Bf16Matrix needs the torch extra")
    import infercast.engine.qlinear as ql
    from infercast.engine.qlinear import Bf16Matrix, Scratch

    monkeypatch.setattr(ql, "bf16_jit_max_tokens", lambda: ql.KERNEL_MAX_TOKENS)

    rng = np.random.default_rng(6)
    w = Bf16Matrix(rng.standard_normal((96, 160), dtype=np.float32))
    x = rng.standard_normal((160, tokens), dtype=np.float32)
    got = w.matmul_fm(x, Scratch())
    want = w.dequantize() @ x
    assert got.shape == (96, tokens) and got.flags.c_contiguous
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


@pytest.mark.parametrize(
    ("locality", "emit", "instruction"),
    [(3, True, "prefetcht0"), (0, True, "prefetchnta"), (0, False, None)],
)
def test_prefetch_emits_a_prefetch_and_changes_no_result(locality, emit, instruction):
    """decode_jit.prefetch compiles to a prefetch instruction of its locality (x86: prefetcht0
    into every level, prefetchnta non-temporal) at an element's address, even one far past the
    buffer's end (a prefetch never faults), and the loop that issues it computes what it would
    without; with ``emit`` False (bf16_prefetch where BF16_PREFETCH is off), no instruction."""
    import platform

    from numba import njit

    from infercast.engine.decode_jit import prefetch

    pf = prefetch(locality, emit)

    @njit
    def total(a, ahead):
        s = np.float32(0.0)
        for i in range(a.shape[0]):
            pf(a, i + ahead)
            s += a[i]
        return s

    a = np.arange(1000, dtype=np.float32)
    assert total(a, 1 << 30) == total(a, 0) == a.sum()
    if platform.machine() in ("x86_64", "AMD64"):
        found = re.findall(
            r"\s(prefetch(?:nta|t0|t1|t2|w))\s", next(iter(total.inspect_asm().values()))
        )
        assert set(found) == ({instruction} if instruction else set())


def test_the_bf16_rows_prefetch_only_with_avx512():
    """BF16_PREFETCH follows AVX-512 (measured faster on the Zen 5, slower on the AVX2 Zen 2)."""
    from infercast.engine.decode_jit import BF16_PREFETCH, bf16_rows_prefetched, cpu_flags

    assert bf16_rows_prefetched(frozenset({"avx2", "avx512f", "avx512bw"}))
    assert not bf16_rows_prefetched(frozenset({"avx2", "fma", "f16c"}))
    assert BF16_PREFETCH == bf16_rows_prefetched(cpu_flags())


@pytest.mark.parametrize("fmt", ["int8", "bf16"])
def test_threaded_products_equal_one_thread(fmt):
    """With Scratch(threads=2) the int8/bf16 products run over row chunks on numba's
    threads (rows beyond a whole chunk included) and give one thread's numbers."""
    pytest.importorskip("torch", reason="compact matrices need the torch extra")
    from infercast.engine.decode_jit import ROW_CHUNK
    from infercast.engine.qlinear import Scratch, to_format

    rng = np.random.default_rng(7)
    w = to_format(rng.standard_normal((2 * ROW_CHUNK + 5, 96), dtype=np.float32), fmt)
    for tokens in (1, 3 if fmt == "bf16" else 7):  # within the loops' limits on any CPU
        x = rng.standard_normal((96, tokens), dtype=np.float32)
        one, two = w.matmul_fm(x, Scratch(1)), w.matmul_fm(x, Scratch(2))
        assert np.allclose(one, two, rtol=1e-5, atol=1e-5)
        assert np.abs(one - w.dequantize() @ x).max() < 1e-4 * np.abs(one).max()


@pytest.mark.parametrize("tokens", [2, 3, 5, 8, 15])
@pytest.mark.parametrize("threads", [1, 2])
def test_fp32_products_of_few_tokens_run_the_compiled_kernel_exactly(tokens, threads, monkeypatch):
    """Up to fp32_jit_max_tokens() (raised to 16 here, any CPU) an fp32 product of 2+ tokens
    is the numba loop (8-, 4-, 2- and 1-token passes over each row; rows beyond a whole chunk)
    and equals the OpenBLAS product it replaces to float32 rounding."""
    import infercast.engine.qlinear as ql
    from infercast.engine.decode_jit import ROW_CHUNK
    from infercast.engine.linear import linear_fm

    def blas(*_):
        raise AssertionError("the fp32 product went to OpenBLAS, not the numba loop")

    rng = np.random.default_rng(9)
    w = rng.standard_normal((2 * ROW_CHUNK + 5, 200), dtype=np.float32)
    x = rng.standard_normal((200, tokens), dtype=np.float32)
    want = linear_fm(w, x)
    monkeypatch.setattr(ql, "fp32_jit_max_tokens", lambda: 16)
    monkeypatch.setattr(ql, "linear_fm", blas)
    got = ql.matmul_fm(w, x, ql.Scratch(threads))
    assert got.shape == want.shape and got.flags.c_contiguous
    assert np.abs(got - want).max() < 1e-5 * np.abs(want).max()


def _q4_int_reference(rows, x: np.ndarray) -> np.ndarray:
    """The integer q4 kernel's arithmetic in float64: x [K, T] as two int8 planes per group of
    32 (d = max|x| / 127: q = round(x / d), r = round(256 (x / d - q))), each group's exact
    sum for the offset term, the file's d and m in fp16."""
    n, k = rows.shape
    g = k // 32
    xg = x.T.reshape(-1, g, 32)  # [T, G, 32]
    amax = np.abs(xg).max(axis=2)
    inv = np.divide(np.float32(127.0), amax, out=np.zeros_like(amax), where=amax > 0)
    y = xg * inv[..., None]
    q = np.rint(y)
    xq = 256.0 * q.astype(np.float64) + np.clip(np.rint((y - q) * np.float32(256.0)), -127, 127)
    dx = (amax / np.float32(127.0 * 256.0)).astype(np.float64)
    d = rows.scale.astype(np.float16).astype(np.float64)  # [N, G]
    m = (rows.zero - 8.0 * rows.scale).astype(np.float16).astype(np.float64)
    qg = rows.q.reshape(n, g, 32).astype(np.float64)
    dots = np.einsum("ngk,tgk->ntg", qg, xq)  # integer sums, exact in float64
    return np.einsum("ntg,ng,tg->nt", dots, d, dx) + m @ xg.sum(axis=2).T.astype(np.float64)


@pytest.mark.parametrize("tokens", [1, 2, 5, 48])
@pytest.mark.parametrize("threads", [1, 2])
def test_q4_products_of_few_tokens_run_the_compiled_kernel_exactly(tokens, threads, monkeypatch):
    """Up to Q4_JIT_MAX_TOKENS the q4 product is a numba loop over the stored 4-bit groups,
    to float32 rounding (1e-5 of the largest output) of its arithmetic: where this CPU
    has the integer kernel (decode_jit.q4_isa), the file's groups times x quantized to two
    int8 planes per group (_q4_int_reference; within 2e-3 of the float product), else the
    groups dequantized to float32 (exact scales) times x. Rows padded to the layout's blocks
    (260 = 4 x 64 + 4); 5 and 48 tokens: up to the integer kernel's limit (48), or the float
    kernel's many-token loop, run here by raising its crossover."""
    pytest.importorskip("torch", reason="Int4Matrix needs the torch extra")
    import infercast.engine.qlinear as ql
    from infercast.engine.qformats import quantize_q4
    from infercast.engine.qlinear import Int4Matrix, Scratch

    monkeypatch.setattr(ql, "Q4_JIT_MAX_TOKENS", max(ql.Q4_JIT_MAX_TOKENS, tokens))
    rng = np.random.default_rng(8)
    rows = quantize_q4(rng.standard_normal((260, 160), dtype=np.float32))
    x = rng.standard_normal((160, tokens), dtype=np.float32)
    mat = Int4Matrix(rows)
    got = mat.matmul_fm(x, Scratch(threads))
    exact = rows.dequantize().astype(np.float64) @ x
    want = _q4_int_reference(rows, x) if len(mat.jit_layout) == 1 else exact
    assert got.shape == (260, tokens) and got.flags.c_contiguous
    assert np.abs(got - want).max() < 1e-5 * np.abs(want).max()
    # 2e-3: mostly the fp16 rounding of this test's float32 scales (a file's are fp16)
    assert np.abs(got - exact).max() < 2e-3 * np.abs(exact).max()


def _host_has(isa: str) -> bool:
    import llvmlite.binding as llvm

    f = llvm.get_host_cpu_features()
    need = {"vnni512": ("avx512vnni", "avx512bw"), "bw512": ("avx512bw",), "avx2": ("avx2",)}
    return all(f.get(n) for n in need[isa])


@pytest.mark.parametrize("isa", ["vnni512", "bw512", "avx2"])
def test_each_integer_q4_variant_computes_the_same_products(isa):
    """The VNNI, AVX-512BW and AVX2 variants of the integer q4 kernel (each run where this
    CPU has its instructions) equal the reference arithmetic to float32 rounding, for 1
    and 3 tokens, on 1 and 2 threads (blocks split across numba's threads); several tokens'
    products equal each one's alone."""
    from infercast.engine.decode_jit import Q4_ROWS, q4_int_kernels, q4_int_layout
    from infercast.engine.qformats import quantize_q4

    if not _host_has(isa):
        pytest.skip(f"this CPU has no {isa} instructions")
    serial, threaded = q4_int_kernels(isa)[:2]
    rng = np.random.default_rng(11)
    rows = quantize_q4(rng.standard_normal((130, 96), dtype=np.float32))
    qv = q4_int_layout(rows.q, rows.scale, rows.zero - 8.0 * rows.scale)
    for tokens, kernel, tasks in ((1, serial, 1), (3, serial, 1), (3, threaded, 2)):
        x = rng.standard_normal((96, tokens), dtype=np.float32)
        out = np.full((qv.shape[0] * Q4_ROWS, tokens), np.nan, dtype=np.float32)
        kernel(qv, np.ascontiguousarray(x.T), out, tasks)
        want = _q4_int_reference(rows, x)
        assert np.abs(out[:130] - want).max() < 1e-5 * np.abs(want).max()
        assert not out[130:].any()  # padding rows: zero weights, zero scales
    # tokens in pairs (one block load for both) and an odd last one: each token's products
    # are its one-token ones to the bit (exact integer sums, the same float steps)
    x = rng.standard_normal((5, 96), dtype=np.float32)
    out = np.empty((qv.shape[0] * Q4_ROWS, 5), dtype=np.float32)
    serial(qv, x, out, 1)
    for t in range(5):
        one = np.empty((qv.shape[0] * Q4_ROWS, 1), dtype=np.float32)
        serial(qv, x[t : t + 1], one, 1)
        assert np.array_equal(out[:, t], one[:, 0])


def _int8_int_reference(q: np.ndarray, scale: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The integer int8 kernel's arithmetic in float64: each token x [K, T] as two planes with
    one scale d = max|x| / 127 (q = round(x / d), r = round(256 (x / d - q)), float32 as the
    kernel rounds them), the int8 rows' exact integer sums with both, scaled by s_r d."""
    xt = np.ascontiguousarray(x.T)  # [T, K]
    amax = np.abs(xt).max(axis=1)
    inv = np.divide(np.float32(127.0), amax, out=np.zeros_like(amax), where=amax > 0)
    y = xt * inv[:, None]
    xq = np.rint(y)
    xr = np.clip(np.rint((y - xq) * np.float32(256.0)), -127, 127)
    qf = q.astype(np.float64)
    dots = qf @ xq.T.astype(np.float64) + qf @ xr.T.astype(np.float64) / 256.0  # [N, T]
    return dots * scale.astype(np.float64)[:, None] * (amax / np.float32(127.0))[None, :]


def _int8_int_bound(q: np.ndarray, scale: np.ndarray, x: np.ndarray) -> np.ndarray:
    """How far the integer kernel may be from the exact product of the int8 rows [N, T]: each
    element of x is d (q + r / 256) to within d / 512, d / 256 where r = +-128 is clipped to
    127, so row r's sum is off by at most s_r (d / 256) sum_c |q[r, c]|."""
    d = np.abs(x).max(axis=0) / 127.0
    return scale[:, None] * np.abs(q.astype(np.float64)).sum(axis=1)[:, None] * d / 256.0


@pytest.mark.parametrize("isa", ["vnni512", "bw512", "avx2"])
def test_each_integer_int8_variant_computes_its_arithmetic(isa):
    """The VNNI, AVX-512BW and AVX2 variants of the integer int8 kernel (each where this CPU
    has its instructions) equal their reference arithmetic to float32 rounding and the exact
    product of the int8 rows within the activations' rounding bound: 1 token (its own loop:
    one row at a time) and 3, rows in whole groups of 8 and a rest (133 = 2 x 64 + 5), on 1
    and 2 threads, K of 1 and 5 vectors (an odd one after the pairs); one row of zeros, one
    token of zeros (d = 0)."""
    from infercast.engine.decode_jit import int8_int_kernels
    from infercast.engine.qformats import quantize_int8_rows

    if not _host_has(isa):
        pytest.skip(f"this CPU has no {isa} instructions")
    serial, threaded, _, _ = int8_int_kernels(isa)
    rng = np.random.default_rng(13)
    for k in (64, 320):
        w = rng.standard_normal((133, k), dtype=np.float32)
        w[7] = 0.0
        q, s = quantize_int8_rows(w)
        ws = q.sum(axis=1, dtype=np.int32)
        for tokens, kernel, tasks in (
            (1, serial, 1),
            (1, threaded, 2),
            (3, serial, 1),
            (3, threaded, 2),
        ):
            x = rng.standard_normal((k, tokens), dtype=np.float32) * 4
            if tokens == 3:
                x[:, 1] = 0.0
            out = np.full((133, tokens), np.nan, dtype=np.float32)
            kernel(q, ws, s, np.ascontiguousarray(x.T), out, tasks)
            want = _int8_int_reference(q, s, x)
            exact = (q.astype(np.float64) * s[:, None]) @ x
            assert np.abs(out - want).max() < 1e-5 * np.abs(want).max()
            assert (
                np.abs(out - exact) <= _int8_int_bound(q, s, x) + 1e-5 * np.abs(exact).max()
            ).all()
            assert not out[7].any() and (tokens == 1 or not out[:, 1].any())


@pytest.mark.parametrize("tokens", [1, 2, 8])
@pytest.mark.parametrize("threads", [1, 2])
def test_int8_products_run_the_integer_kernel_where_the_cpu_has_one(tokens, threads):
    """An Int8Matrix of whole 64-byte rows (K = 576, SmolLM2's) on a CPU with the integer
    kernel (decode_jit.int8_int_ok): its product is the kernel's arithmetic
    (_int8_int_reference); elsewhere the float loop's, exact to float32 rounding."""
    pytest.importorskip("torch", reason="Int8Matrix needs the torch extra")
    from infercast.engine.decode_jit import int8_int_ok
    from infercast.engine.qlinear import Int8Matrix, Scratch

    rng = np.random.default_rng(14)
    w = Int8Matrix(rng.standard_normal((200, 576), dtype=np.float32))
    x = rng.standard_normal((576, tokens), dtype=np.float32)
    got = w.matmul_fm(x, Scratch(threads))
    exact = w.dequantize().astype(np.float64) @ x
    want = _int8_int_reference(w.q_np, w.s32, x) if int8_int_ok(576) else exact
    assert got.shape == (200, tokens) and got.flags.c_contiguous
    assert np.abs(got - want).max() < 1e-5 * np.abs(want).max()


def test_int8_integer_kernel_only_for_whole_vectors_and_when_switched_on(monkeypatch):
    """Columns not a multiple of 64, beyond the int32 sums' reach (INT8_INT_MAX_COLS), or the
    INT8_INT switch off (old-vs-new benchmarks): the float loop."""
    import infercast.engine.decode_jit as dj

    on = dj.q4_isa() is not None
    assert dj.int8_int_ok(576) is on and dj.int8_int_ok(dj.INT8_INT_MAX_COLS) is on
    assert not dj.int8_int_ok(160) and not dj.int8_int_ok(dj.INT8_INT_MAX_COLS + 64)
    monkeypatch.setattr(dj, "INT8_INT", False)
    assert not dj.int8_int_ok(576)


def test_q4_int_layout_puts_each_rows_words_across_a_block():
    """Block c, group g, word k, row j, byte b: the byte of row 64 c + j holding elements
    4 k + b (low nibble) and 16 + 4 k + b (high nibble) of group g; then the block's fp16
    d and m of group g, row by row; padding rows zero."""
    from infercast.engine.decode_jit import Q4_INT_GROUP_BYTES, Q4_ROWS, q4_int_layout

    rng = np.random.default_rng(10)
    q = rng.integers(0, 16, (70, 64), dtype=np.uint8)
    d, m = rng.random((70, 2), dtype=np.float32), rng.random((70, 2), dtype=np.float32)
    qv = q4_int_layout(q, d, m)
    assert qv.shape == (2, 2, Q4_INT_GROUP_BYTES) and Q4_INT_GROUP_BYTES == 20 * Q4_ROWS
    j, k, b = 5, 2, 3  # row 69 = 64 + 5, element 4 k + b = 11 of group 1
    assert qv[1, 1, k * 4 * Q4_ROWS + 4 * j + b] == q[69, 32 + 11] | (q[69, 32 + 16 + 11] << 4)
    scales = qv[:, :, 16 * Q4_ROWS :].copy().view(np.float16)  # [C, G, 2 R]
    assert scales[1, 0, j] == np.float16(d[69, 0])
    assert scales[0, 1, Q4_ROWS + 2] == np.float16(m[2, 1])
    assert not scales[1, :, 6:Q4_ROWS].any() and not scales[1, :, Q4_ROWS + 6 :].any()
    assert not qv[1, :, : 16 * Q4_ROWS].reshape(2, 4, Q4_ROWS, 4)[:, :, 6:].any()


def test_q4_float_layout_puts_each_groups_bytes_across_a_block_of_rows():
    """Block c, group g, byte row i, lane j: the byte of row 64 c + j holding elements i
    (low nibble) and 16 + i (high nibble) of group g; scales transposed alike."""
    from infercast.engine.decode_jit import Q4_ROWS, q4_float_layout

    rng = np.random.default_rng(9)
    q = rng.integers(0, 16, (70, 64), dtype=np.uint8)
    d, m = rng.random((70, 2), dtype=np.float32), rng.random((70, 2), dtype=np.float32)
    qt, dt, mt = q4_float_layout(q, d, m)
    assert qt.shape == (2, 2, 16, Q4_ROWS) and dt.shape == mt.shape == (2, 2, Q4_ROWS)
    assert qt[1, 1, 3, 5] == q[69, 32 + 3] | (q[69, 32 + 16 + 3] << 4)
    assert dt[1, 0, 5] == d[69, 0] and mt[0, 1, 2] == m[2, 1]
    assert not qt[1, :, :, 6:].any() and not dt[1, :, 6:].any()  # padding rows are zero


def test_float_q4_kernel_runs_where_the_integer_one_is_switched_off(monkeypatch):
    """With ``Q4_INT`` off (the old-vs-new benchmarks' switch, and CPUs without the
    integer kernel) a q4 matrix carries the float layout and its product is exact."""
    pytest.importorskip("torch", reason="Int4Matrix needs the torch extra")
    import infercast.engine.decode_jit as dj
    from infercast.engine.qformats import quantize_q4
    from infercast.engine.qlinear import Int4Matrix, Scratch

    monkeypatch.setattr(dj, "Q4_INT", False)
    rng = np.random.default_rng(12)
    rows = quantize_q4(rng.standard_normal((70, 64), dtype=np.float32))
    mat = Int4Matrix(rows)
    assert len(mat.jit_layout) == 3
    x = rng.standard_normal((64, 1), dtype=np.float32)
    want = rows.dequantize().astype(np.float64) @ x
    got = mat.matmul_fm(x, Scratch(1))
    assert np.abs(got - want).max() < 1e-5 * np.abs(want).max()


def test_no_integer_q4_kernel_for_a_chosen_numba_target(monkeypatch):
    """With NUMBA_CPU_NAME set numba compiles for that CPU, which may lack the host's
    instructions: q4_isa gives None (the float kernel)."""
    import numba

    from infercast.engine.decode_jit import q4_isa

    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert q4_isa.__wrapped__() is None


def test_huge_empty_gives_a_writable_array_aligned_to_huge_pages():
    import mmap

    from infercast.engine.decode_jit import HUGE_PAGE, huge_empty

    a = huge_empty((3, HUGE_PAGE // 8), np.int32)  # 1.5 huge pages
    assert a.shape == (3, HUGE_PAGE // 8) and a.dtype == np.int32 and a.flags.c_contiguous
    a[:] = 7
    assert int(a.sum()) == 7 * a.size
    if hasattr(mmap, "MADV_HUGEPAGE"):
        assert a.ctypes.data % HUGE_PAGE == 0
    small = huge_empty((4, 4), np.float32)  # under a huge page: plain numpy memory
    assert small.shape == (4, 4) and small.flags.owndata


def test_huge_empty_keeps_small_pages_where_the_kernel_refuses_the_advice(monkeypatch):
    import mmap

    from infercast.engine import decode_jit

    if not hasattr(mmap, "MADV_HUGEPAGE"):
        pytest.skip("no MADV_HUGEPAGE on this platform: huge_empty is np.empty")

    class Refusing(mmap.mmap):
        def madvise(self, *args):
            raise OSError(22, "Invalid argument")

    monkeypatch.setattr(mmap, "mmap", Refusing)
    a = decode_jit.huge_empty((decode_jit.HUGE_PAGE,), np.uint8)
    a[-1] = 3
    assert a.size == decode_jit.HUGE_PAGE and a[-1] == 3
