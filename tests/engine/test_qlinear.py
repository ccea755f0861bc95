"""Compact-weight kernels against dequantize-then-matmul, at decode and prefill sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from infercast.engine.qformats import quantize_q4  # noqa: E402
from infercast.engine.qlinear import (  # noqa: E402
    KERNEL_MAX_TOKENS,
    Bf16Matrix,
    Int4Matrix,
    Int8Matrix,
    Scratch,
    matmul_fm,
    to_format,
    widen_int4,
)

TOKENS = (1, 3, 8, KERNEL_MAX_TOKENS, KERNEL_MAX_TOKENS + 1, 130)  # kernel and widening paths


def _w(n: int, k: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((n, k)) * 0.05).astype(np.float32)


def _x(k: int, t: int) -> np.ndarray:
    return np.random.default_rng(t).standard_normal((k, t)).astype(np.float32)


def _check(m, ref_w: np.ndarray, t: int) -> None:
    """matmul_fm equals ref_w @ x within bf16 rounding of activations and outputs."""
    x = _x(ref_w.shape[1], t)
    got = matmul_fm(m, x, Scratch())
    ref = ref_w.astype(np.float64) @ x
    assert got.shape == ref.shape and got.dtype == np.float32 and got.flags.c_contiguous
    assert np.abs(got - ref).max() <= 2e-2 * np.abs(ref).max()


@pytest.fixture(params=["integer", "float", "torch"])
def q4_path(request, monkeypatch):
    """Where q4 lives: the integer or the float numba kernel's layout (each where this CPU and
    numba allow it), or PyTorch's packing (the path without numba, ``Q4_TORCH``)."""
    import infercast.engine.decode_jit as dj
    import infercast.engine.qlinear as ql

    if request.param == "torch":
        monkeypatch.setattr(ql, "Q4_TORCH", True)
    elif dj.kernels() is None:
        pytest.skip("numba is not installed")
    elif request.param == "float":
        monkeypatch.setattr(dj, "Q4_INT", False)
    elif dj.q4_isa() is None:
        pytest.skip("this CPU has no integer q4 kernel")
    return request.param


def _fp16_rows(n: int, k: int, seed: int = 0):
    """Q4 rows whose d and m are fp16 values, as a GGUF Q4_1 file stores them."""
    from infercast.engine.qformats import Q4Rows

    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, (n, k), dtype=np.uint8)
    d = (rng.uniform(1e-3, 2e-2, (n, k // 32))).astype(np.float16).astype(np.float32)
    m = (rng.uniform(-0.2, 0.1, (n, k // 32))).astype(np.float16).astype(np.float32)
    return Q4Rows(q, d, m + 8.0 * d)


@pytest.mark.parametrize("t", TOKENS)
@pytest.mark.parametrize("n", [96, 260])  # neither a multiple of the 64-row packing
def test_int4_matches_its_dequantized_matrix(t, n, q4_path):
    rows = quantize_q4(_w(n, 128))
    m = Int4Matrix(rows)
    assert (m.packed is None) == (q4_path != "torch")
    deq = m.dequantize()
    # Only the rounding of scale and zero (fp16 in the integer layout, bf16 in PyTorch's
    # packing) separates the kept matrix from the rows.
    assert np.abs(deq - rows.dequantize()).max() <= 1e-2 * np.abs(rows.dequantize()).max()
    _check(m, deq, t)


@pytest.mark.parametrize("n", [64, 200])
def test_q4_widened_tiles_and_rows_are_the_files_dequantized_rows_exactly(n, q4_path):
    """Where numba runs, prefill's widened tiles, the embedding rows and ``dequantize`` are
    the file's own weights (fp16 d and m, ``q d + m``) to the bit: the weights decode's
    kernels multiply. PyTorch's packing rounds d and m to bf16."""
    rows = _fp16_rows(n, 96, seed=n)
    m = Int4Matrix(rows)
    want = rows.dequantize()
    buf = np.empty(96 * 256, dtype=np.float32)
    tile = m._widen(64, n, buf) if n > 64 else m._widen(0, n, buf)
    r0 = 64 if n > 64 else 0
    ids = np.array([0, 31, 32, 63, n - 1, 5])
    if q4_path == "torch":
        assert np.abs(m.dequantize() - want).max() > 1e-4 * np.abs(want).max()
        np.testing.assert_allclose(tile, m.dequantize()[r0:n], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(m.rows(ids), m.dequantize()[ids], rtol=1e-6, atol=1e-7)
        return
    assert tile.shape == (n - r0, 96)
    np.testing.assert_array_equal(tile, want[r0:n])
    np.testing.assert_array_equal(m.dequantize(), want)
    np.testing.assert_array_equal(m.rows(ids), want[ids])


def test_int4_bytes_are_what_it_keeps(monkeypatch):
    """nbytes is what a q4 matrix holds and a decode step reads: the numba layout where numba
    runs (fp16 scale and offset per group for the integer kernel, float32 for the float one),
    PyTorch's packing (bf16 scale and zero) where it does not; never both."""
    import infercast.engine.decode_jit as dj
    import infercast.engine.qlinear as ql

    m = Int4Matrix(quantize_q4(_w(64, 128)))
    if m.jit_layout is not None:
        assert m.packed is None
        per_scale = 2 if len(m.jit_layout) == 1 else 4
        assert m.nbytes == 64 * 128 // 2 + (128 // 32) * 64 * 2 * per_scale
        monkeypatch.setattr(dj, "Q4_INT", False)
        assert Int4Matrix(quantize_q4(_w(64, 128))).nbytes == 64 * 128 // 2 + 4 * 64 * 2 * 4
    monkeypatch.setattr(ql, "Q4_TORCH", True)
    m = Int4Matrix(quantize_q4(_w(64, 128)))
    assert m.jit_layout is None
    assert m.nbytes == 64 * 128 // 2 + (128 // 32) * 64 * 2 * 2


@pytest.mark.parametrize("cls", [Int8Matrix, Bf16Matrix])
@pytest.mark.parametrize("t", TOKENS)
def test_int8_and_bf16_match_their_dequantized_matrix(cls, t):
    m = cls(_w(100, 64))
    _check(m, m.dequantize(), t)
    ids = np.array([0, 99, 5])
    np.testing.assert_allclose(m.rows(ids), m.dequantize()[ids])


def test_format_bytes_per_weight():
    w = _w(64, 128)
    assert to_format(w, "bf16").nbytes == w.size * 2
    assert to_format(w, "int8").nbytes == w.size + 64 * 2
    assert to_format(w, "fp32").nbytes == w.size * 4


def test_packing_block_is_what_torch_packs_on_this_cpu():
    """Rows 0 and B/2 of a block share byte 0 (B = packing_block()), whatever the CPU."""
    from infercast.engine.qlinear import PACK_PAD, packing_block

    blk = packing_block()
    assert blk in (32, 64) and PACK_PAD % blk == 0
    q = np.zeros((PACK_PAD, 64), dtype=np.int32)
    q[0], q[blk // 2] = 3, 5
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(q), 1).numpy()
    assert packed[0, 0] == 3 | (5 << 4)


def test_widening_of_the_packing_reads_its_layout(monkeypatch):
    import infercast.engine.qlinear as ql

    monkeypatch.setattr(ql, "Q4_TORCH", True)
    rows = quantize_q4(_w(64, 96, seed=5))
    m = Int4Matrix(rows)
    a = np.empty((96, 64), dtype=np.float32)
    widen_int4(m.packed.numpy(), m.scale_t, m.zero_t, a)
    # The layout assumed: per block of B rows (32 or 64 by CPU), column-major bytes, low
    # nibble = the block's first B/2 rows.
    expect = (rows.q.astype(np.float32) - 8) * m.scale_t.T.repeat(32, axis=1) + m.zero_t.T.repeat(
        32, axis=1
    )
    np.testing.assert_allclose(a.T, expect, rtol=1e-6, atol=1e-6)


def test_one_token_reaches_torch_as_a_plain_row():
    from infercast.engine.qlinear import _to_torch_rows

    x = np.arange(6, dtype=np.float32).reshape(6, 1)  # feature-major, one token
    t = _to_torch_rows(x, torch, torch.bfloat16)
    assert tuple(t.shape) == (1, 6) and t.stride() == (6, 1)  # (1, 1) sent bf16 to a slow path
    assert t.float().numpy().ravel().tolist() == list(range(6))


@pytest.mark.parametrize(("capability", "limit"), [("AVX512", 8), ("AVX2", 48), ("DEFAULT", 48)])
def test_int8_numba_loop_limit_follows_the_kernels_pytorch_dispatches(
    monkeypatch, capability, limit
):
    """PyTorch's AVX-512 int8 kernel beats the numba loop beyond 8 tokens; its AVX2 one only
    beyond 48 (qlinear's measurements)."""
    from infercast.engine.qlinear import int8_jit_max_tokens

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    int8_jit_max_tokens.cache_clear()
    try:
        assert int8_jit_max_tokens() == limit
    finally:
        int8_jit_max_tokens.cache_clear()


@pytest.mark.parametrize(("flags", "limit"), [({"avx512_bf16", "avx512f"}, 4), ({"avx2"}, 48)])
def test_bf16_numba_loop_limit_follows_native_bf16_dot_products(monkeypatch, flags, limit):
    """With AVX-512 BF16 PyTorch's bf16 matmul beats the numba loop beyond 4 tokens; without
    it the loop runs every decode-sized product (qlinear's measurements)."""
    import infercast.engine.qlinear as ql

    monkeypatch.setattr(ql, "cpu_flags", lambda: frozenset(flags))
    ql.bf16_jit_max_tokens.cache_clear()
    try:
        assert ql.bf16_jit_max_tokens() == limit
    finally:
        ql.bf16_jit_max_tokens.cache_clear()


@pytest.mark.parametrize(
    ("flags", "limit"), [({"avx512f", "avx2"}, 8), ({"avx2"}, 8), ({"sse2", "neon"}, 1)]
)
def test_fp32_numba_loop_runs_where_it_was_measured_faster(monkeypatch, flags, limit):
    """With AVX-512 or AVX2 the numba loop replaces OpenBLAS for 2-8 tokens; elsewhere (limit
    1) the row-blocked OpenBLAS products stay (qlinear's measurements)."""
    import infercast.engine.qlinear as ql

    monkeypatch.setattr(ql, "cpu_flags", lambda: frozenset(flags))
    ql.fp32_jit_max_tokens.cache_clear()
    try:
        assert ql.fp32_jit_max_tokens() == limit
    finally:
        ql.fp32_jit_max_tokens.cache_clear()


def test_cpu_flags_are_read_from_cpuinfo():
    from pathlib import Path

    from infercast.engine.qlinear import cpu_flags

    flags = cpu_flags()
    assert isinstance(flags, frozenset)
    if Path("/proc/cpuinfo").is_file() and "x86" in __import__("platform").machine():
        assert "sse2" in flags


@pytest.mark.parametrize(
    ("fmt", "t", "kernels"),
    [
        ("fp32", 4, {"fp32"}),  # the numba loop on AVX-512 or AVX2, OpenBLAS elsewhere
        ("int8", 3, {"int8i", "int8"}),  # integer where this CPU has a variant
        ("int8", 20, {"int8i", "int8", "torch"}),  # PyTorch's where the float loop stops
        ("bf16", 3, {"bf16"}),
        ("bf16", 20, {"bf16", "torch"}),  # PyTorch's matmul with native bf16
        ("bf16", KERNEL_MAX_TOKENS + 16, {"widen"}),
        ("q4", 3, {"q4i", "q4", "torch"}),  # PyTorch's without numba
        ("q4", 8, {"q4i", "widen", "torch"}),  # widened beyond the float kernel's 4
        ("q4", KERNEL_MAX_TOKENS + 16, {"q4i", "widen"}),  # integer prefill where it runs
        ("int8", KERNEL_MAX_TOKENS + 16, {"int8i", "widen"}),
    ],
)
def test_products_are_the_same_on_one_thread_and_on_two(fmt, t, kernels, monkeypatch):
    """Every kernel path gives the serial path's product when engine/threads.py puts it on
    two threads (crossovers at 0) instead of one (at inf), to float32 rounding; PyTorch's
    kernels run on the intra-op threads the rule chose."""
    import infercast.engine.qlinear as ql
    import infercast.engine.threads as th

    chosen = []
    real = th.product_threads
    monkeypatch.setattr(
        ql, "product_threads", lambda *a: chosen.append((a[0], real(*a))) or real(*a)
    )
    m = to_format(_w(260, 192, seed=3), fmt)
    x = _x(192, t)
    got = {}
    before = torch.get_num_threads()
    try:
        for crossover in (math.inf, 0.0):
            monkeypatch.setattr(
                th, "THREADED_MIN_WORK", dict.fromkeys(th.THREADED_MIN_WORK, crossover)
            )
            chosen.clear()
            got[crossover] = matmul_fm(m, x, Scratch(2))
            want = 1 if crossover else 2
            if chosen and chosen[-1][0] == "torch":
                assert torch.get_num_threads() == want
            assert {k for k, _ in chosen} <= kernels and all(n == want for _, n in chosen)
    finally:
        torch.set_num_threads(before)
    one, two = got[math.inf], got[0.0]
    assert np.abs(two - one).max() <= 1e-5 * np.abs(one).max()


@pytest.mark.parametrize("fmt", ["q4", "int8"])
def test_integer_prefill_runs_the_integer_kernel_in_token_chunks(fmt, monkeypatch):
    """With ``INT_PREFILL`` on, a q4 or int8 product beyond KERNEL_MAX_TOKENS runs this CPU's
    integer kernel (never the widened tiles) in chunks of ``INT_PREFILL_CHUNK_TOKENS`` tokens,
    the last one partial, and equals the dequantized matrix's product; off, it widens."""
    import infercast.engine.qlinear as ql
    from infercast.engine.decode_jit import Q4_ISAS

    chosen = []
    real = ql.product_threads
    monkeypatch.setattr(ql, "product_threads", lambda *a: chosen.append(a[0]) or real(*a))
    monkeypatch.setattr(ql, "INT_PREFILL_CHUNK_TOKENS", 64)
    monkeypatch.setattr(ql, "INT_PREFILL_ISAS", frozenset(Q4_ISAS))  # this CPU's variant too
    m = to_format(_w(260, 192, seed=4), fmt)
    t = 2 * 64 + 5
    for on in (True, False):
        monkeypatch.setattr(ql, "INT_PREFILL", on)
        chosen.clear()
        _check(m, m.dequantize(), t)
        integer = ql.integer_prefill(fmt)
        assert integer == (on and chosen == [f"{fmt}i"])
        if not integer:
            assert chosen == ["widen"]


def test_integer_prefill_is_for_q4_and_int8_only(monkeypatch):
    import infercast.engine.qlinear as ql

    monkeypatch.setattr(ql, "INT_PREFILL", True)
    assert not ql.integer_prefill("fp32") and not ql.integer_prefill("bf16")
    monkeypatch.setattr(ql, "INT_PREFILL", False)
    assert not ql.integer_prefill("q4") and not ql.integer_prefill("int8")


def test_integer_prefill_only_on_the_variants_measured_faster(monkeypatch):
    """On an integer variant outside ``INT_PREFILL_ISAS`` (AVX2's: slower than widened tiles and
    OpenBLAS there) q4 and int8 prefill widen; inside it they run the integer kernel."""
    import infercast.engine.decode_jit as dj
    import infercast.engine.qlinear as ql

    if ql.kernels() is None:
        pytest.skip("no numba: no integer kernels")
    monkeypatch.setattr(ql, "INT_PREFILL", True)
    monkeypatch.setattr(dj, "q4_isa", lambda: "avx2")
    monkeypatch.setattr(ql, "INT_PREFILL_ISAS", frozenset({"vnni512"}))
    assert not ql.integer_prefill("q4") and not ql.integer_prefill("int8")
    chosen = []
    real = ql.product_threads
    monkeypatch.setattr(ql, "product_threads", lambda *a: chosen.append(a[0]) or real(*a))
    for fmt in ("q4", "int8"):  # the products widen
        m = to_format(_w(260, 192, seed=4), fmt)
        chosen.clear()
        _check(m, m.dequantize(), KERNEL_MAX_TOKENS + 5)
        assert chosen == ["widen"]
    monkeypatch.setattr(ql, "INT_PREFILL_ISAS", frozenset({"avx2"}))
    assert ql.integer_prefill("q4") == (dj.Q4_INT and not ql.Q4_TORCH)
