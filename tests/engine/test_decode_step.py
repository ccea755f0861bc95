"""The fused batch-1 decode step (q4, int8 or bf16 layers) equals the per-product path, on 1-3
threads."""

from __future__ import annotations

import numpy as np
import pytest

from infercast.engine.kv_store import PagedKVStore
from infercast.engine.model import LlamaModel, SeqInput

pytest.importorskip("numba", reason="the fused step needs numba (the torch extra)")
pytest.importorskip("torch", reason="q4 matrices need the torch extra")


def _model(fmt: str, threads: int, monkeypatch=None) -> LlamaModel:
    """``q4-float``: q4 with the float kernel (decode_jit.Q4_INT off) on any CPU."""
    from infercast.engine.loader import load

    if fmt == "q4-float":
        import infercast.engine.decode_jit as dj

        monkeypatch.setattr(dj, "Q4_INT", False)
    loaded = load("tiny", seed=1, weights=fmt.removesuffix("-float"))
    return LlamaModel(loaded.cfg, loaded.weights, 64, threads)


def _decode(net: LlamaModel, fused: bool, monkeypatch) -> tuple[np.ndarray, PagedKVStore]:
    """A 21-token prompt on a scattered block table, then one decode step; its logits."""
    import infercast.engine.decode_step as ds

    kv = PagedKVStore(net.cfg, 12, 4)
    table = [9, 2, 7, 0, 11, 5]
    monkeypatch.setattr(ds, "ENABLED", False)
    net.forward([SeqInput([(7 * i) % 250 for i in range(21)], 0, table)], kv)
    monkeypatch.setattr(ds, "ENABLED", fused)
    return net.forward([SeqInput([33], 21, table)], kv)[0], kv


@pytest.mark.parametrize("fmt", ["q4", "q4-float", "int8", "bf16"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_fused_decode_step_equals_the_per_product_path(fmt, threads, monkeypatch):
    """Logits and the K/V it writes agree to float32 rounding with the unfused step (same
    q4 kernel blocks, integer or float, or int8 or bf16 rows, same norm/RoPE/attention
    arithmetic but for e^x, ~1e-6);
    splits of 1, 2 and 3 threads, including threads with no block of a one-block product."""
    net = _model(fmt, threads, monkeypatch)
    assert net.fused is not None
    called = []
    run = net.fused.run
    monkeypatch.setattr(net.fused, "run", lambda *a: called.append(1) or run(*a))
    want, kv_want = _decode(net, False, monkeypatch)
    assert not called
    got, kv_got = _decode(net, True, monkeypatch)
    assert called == [1]
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()
    assert np.abs(want).max() > 0.1
    for a, b in zip(kv_got.k + kv_got.v, kv_want.k + kv_want.v, strict=True):
        assert np.abs(a - b).max() < 1e-5 * max(1.0, np.abs(b).max())
        assert np.abs(b).max() > 0  # the decode's own K/V were written


def test_fused_step_runs_only_for_compact_layers_and_decoding_requests(monkeypatch):
    """fp32 layers have no fused step; a prefill, or a step that mixes one with a decode, runs
    the per-product path; a step of two decoding requests the batched fused one."""
    assert _model("fp32", 1).fused is None
    net = _model("q4", 2)
    monkeypatch.setattr(net.fused, "run", lambda *a: pytest.fail("fused step ran"))
    many = net.fused.run_many
    calls = []
    monkeypatch.setattr(net.fused, "run_many", lambda *a: calls.append(1) or many(*a))
    kv = PagedKVStore(net.cfg, 12, 4)
    net.forward([SeqInput([1, 2, 3], 0, [0]), SeqInput([4, 5], 0, [1])], kv)
    net.forward([SeqInput([6], 3, [0]), SeqInput([7, 8], 2, [1])], kv)
    assert not calls
    out = net.forward([SeqInput([9], 4, [0, 2]), SeqInput([10], 4, [1, 3])], kv)
    assert calls == [1]
    assert len(out) == 2 and all(o.shape == (net.cfg.vocab_size,) for o in out)


def _decode_many(net: LlamaModel, fused: bool, monkeypatch, n: int) -> tuple[list, PagedKVStore]:
    """Prompts of 21, 3, 0, 9, 1, ... tokens on scattered block tables, then one step of n
    requests decoding one token each (the third its first token: no context); their logits."""
    import infercast.engine.decode_step as ds

    kv = PagedKVStore(net.cfg, 48, 4)
    tables = [[9, 2, 7, 0, 11, 5], [1, 3], [20, 21], [30, 31, 32], [40], [44, 45], [47], [46]]
    cached = [21, 3, 0, 9, 1, 5, 2, 3]
    monkeypatch.setattr(ds, "ENABLED", False)
    for i, (table, c) in enumerate(zip(tables[:n], cached[:n], strict=True)):
        if c:
            net.forward([SeqInput([(7 * j + i) % 250 for j in range(c)], 0, table)], kv)
    monkeypatch.setattr(ds, "ENABLED", fused)
    seqs = [SeqInput([33 + i], cached[i], tables[i]) for i in range(n)]
    return net.forward(seqs, kv), kv


@pytest.mark.parametrize("fmt", ["q4", "int8", "bf16"])
@pytest.mark.parametrize(("threads", "n"), [(1, 4), (2, 4), (3, 2), (2, 8)])
def test_batched_fused_decode_step_equals_the_per_product_path(fmt, threads, n, monkeypatch):
    """A step of n requests decoding one token each at different positions (one its first
    token) through the batched fused step: every request's logits and the K/V agree to float32
    rounding with the per-product path's (the same product kernels for n tokens: the integer
    q4 blocks, the integer int8 rows and the float int8 loop of tiny's 160-column down product,
    the bf16 loop); 1-3 threads, one with no token of its own (3 threads, 2 requests)."""
    import infercast.engine.qlinear as ql

    if fmt == "q4":
        from infercast.engine.decode_jit import q4_isa

        if q4_isa() is None:
            pytest.skip("no integer q4 kernel on this CPU: no batched step for q4")
    # the per-product path's bf16 products of n tokens on the same float loop
    monkeypatch.setattr(ql, "bf16_jit_max_tokens", lambda: 8)
    net = _model(fmt, threads, monkeypatch)
    assert net.fused.max_tokens >= n
    calls = []
    many = net.fused.run_many
    monkeypatch.setattr(net.fused, "run_many", lambda *a: calls.append(1) or many(*a))
    want, kv_want = _decode_many(net, False, monkeypatch, n)
    assert not calls
    got, kv_got = _decode_many(net, True, monkeypatch, n)
    assert calls == [1]
    for g, w in zip(got, want, strict=True):
        assert np.abs(g - w).max() < 1e-4 * np.abs(w).max()
        assert np.abs(w).max() > 0.1
    for a, b in zip(kv_got.k + kv_got.v, kv_want.k + kv_want.v, strict=True):
        assert np.abs(a - b).max() < 1e-5 * max(1.0, np.abs(b).max())
        assert np.abs(b).max() > 0


def test_batched_fused_step_takes_at_most_max_tokens(monkeypatch):
    """More decoding requests than the batched step's limit (bf16: where the per-product path
    leaves its float loop) run the per-product path."""
    import infercast.engine.qlinear as ql

    monkeypatch.setattr(ql, "bf16_jit_max_tokens", lambda: 2)
    net = _model("bf16", 1)
    assert net.fused.max_tokens == 2
    monkeypatch.setattr(net.fused, "run_many", lambda *a: pytest.fail("batched step ran"))
    kv = PagedKVStore(net.cfg, 3, 4)
    out = net.forward([SeqInput([i + 1], 0, [i]) for i in range(3)], kv)
    assert len(out) == 3


def test_kv_layers_are_views_of_one_array_per_kind():
    """The fused step reads every layer's K/V through ``k_all``/``v_all``."""
    from infercast.engine.config import named_config

    kv = PagedKVStore(named_config("tiny"), 5, 4)
    kv.k[1][2, 3] = 1.5
    kv.v[0][4, 0] = -2.0
    assert kv.k_all[1, 2, 3].max() == 1.5 and kv.v_all[0, 4, 0].min() == -2.0
    assert kv.nbytes == kv.k_all.nbytes + kv.v_all.nbytes


def test_fused_int8_layers_take_the_integer_kernel_where_it_runs():
    """int8 layers stack as (q, scale, row sums) for the integer kernel where this CPU and the
    matrix's columns allow it (decode_jit.int8_int_ok: tiny's 64-column QKV, O and gate/up),
    else as (q, scale) for the float loop (its 160-column down product): the fused step of
    test_fused_decode_step_equals_the_per_product_path runs both."""
    from infercast.engine.decode_jit import int8_int_ok

    net = _model("int8", 1)
    for w in net.fused.w:
        k = w[0].shape[2]
        assert len(w) == (3 if int8_int_ok(k) else 2)
        if len(w) == 3:
            assert (w[2] == w[0].sum(axis=2, dtype=np.int32)).all()
    assert {w[0].shape[2] for w in net.fused.w} == {64, 160}


@pytest.mark.parametrize("fmt", ["q4", "q4-float", "int8", "bf16"])
def test_fused_step_runs_the_head_in_its_call(fmt, monkeypatch):
    """Asked for logits, the fused call runs the head after the layers (its rows split over the
    call's two threads; q4's in whole 64-row blocks) and returns the per-product path's logits;
    asked for none, it returns None (the caller's path)."""
    net = _model(fmt, 2, monkeypatch)
    assert net.fused.head is not None
    want, kv = _decode(net, False, monkeypatch)
    slots = kv.slots([9, 2, 7, 0, 11, 5], 0, 22)
    x = np.ascontiguousarray(net.w.embed.rows(np.array([33]))[0])
    cos, sin = net.rope.cos[21], net.rope.sin[21]
    got = net.fused.run(x.copy(), cos, sin, kv, slots, True)
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()
    assert net.fused.run(x.copy(), cos, sin, kv, slots) is None


def test_fused_step_leaves_a_float32_head_after_its_call(monkeypatch):
    """A head the step's products cannot read (float32: no layout, :attr:`FusedDecode.head`
    None) runs after the fused layers, with the same logits as the head inside the call."""
    net = _model("int8", 2, monkeypatch)
    want, _ = _decode(net, True, monkeypatch)
    monkeypatch.setattr(net.fused, "head", None)
    monkeypatch.setattr(net.w, "lm_head", net.w.lm_head.dequantize())
    returned = []
    run = net.fused.run
    monkeypatch.setattr(net.fused, "run", lambda *a: returned.append(run(*a)) or returned[-1])
    got, _ = _decode(net, True, monkeypatch)
    assert returned == [None]
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


def test_decode_attention_writes_each_tokens_rotated_k_and_its_v():
    """decode_step.decode_attention (what the probe times) writes every layer's K/V of each
    token at its own slot: K rotated at its position (rotate-half RoPE), V as given."""
    from infercast.engine.config import named_config
    from infercast.engine.decode_step import decode_attention
    from infercast.engine.rope import RotaryTable

    cfg = named_config("tiny")
    kv = PagedKVStore(cfg, 4, 4)
    rng = np.random.default_rng(3)
    pos = np.array([5, 0])
    reads = [kv.slots([0, 1], 0, 6), kv.slots([2], 0, 1)]
    ptr = np.array([0, 6, 7])
    slots = np.concatenate(reads).astype(np.int64)
    nq, nkv, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    qkv = rng.standard_normal((2, (nq + 2 * nkv) * d), dtype=np.float32)
    rope = RotaryTable(cfg, 8)
    cos, sin = np.ascontiguousarray(rope.cos[pos]), np.ascontiguousarray(rope.sin[pos])
    decode_attention(cfg, kv, qkv, cos, sin, ptr, slots)
    flat_k = kv.k_all.reshape(cfg.num_layers, -1, nkv, d)
    flat_v = kv.v_all.reshape(flat_k.shape)
    for t, own in enumerate((slots[5], slots[6])):
        k = qkv[t, nq * d : (nq + nkv) * d].reshape(nkv, d)
        a, b = k[:, : d // 2], k[:, d // 2 :]
        want = np.concatenate([a * cos[t] - b * sin[t], b * cos[t] + a * sin[t]], axis=1)
        for li in (0, cfg.num_layers - 1):
            np.testing.assert_allclose(flat_k[li, own], want, rtol=1e-5, atol=1e-6)
            assert np.array_equal(flat_v[li, own], qkv[t, (nq + nkv) * d :].reshape(nkv, d))


_STREAMS_CHECK = """
import sys
import numpy as np
import infercast.engine.decode_jit as dj
dj.ROW_STREAMS = int(sys.argv[1])  # before decode_step takes it in
import infercast.engine.decode_step as ds
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.loader import load
from infercast.engine.model import LlamaModel, SeqInput
loaded = load("tiny", seed=1, weights="bf16")
out = []
for fused in (False, True):
    net = LlamaModel(loaded.cfg, loaded.weights, 64, int(sys.argv[2]))
    kv = PagedKVStore(net.cfg, 12, 4)
    table = [9, 2, 7, 0, 11, 5]
    ds.ENABLED = False
    net.forward([SeqInput([(7 * i) % 250 for i in range(21)], 0, table)], kv)
    ds.ENABLED = fused
    out.append(net.forward([SeqInput([33], 21, table)], kv)[0])
assert ds.ROW_STREAMS == int(sys.argv[1])
print(float(np.abs(out[1] - out[0]).max() / np.abs(out[0]).max()))
"""


@pytest.mark.parametrize(("streams", "threads"), [(1, 1), (3, 2)])
def test_fused_bf16_rows_read_in_any_number_of_streams_give_the_same_logits(
    streams, threads, tmp_path
):
    """decode_jit.ROW_STREAMS (4 without AVX-512, else 1) splits each thread's bf16 rows into
    parts read a row of each in turn: every row once, whatever the count (a fresh process, as
    the compiled step takes the constant in; its own numba cache)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    got = subprocess.run(
        [sys.executable, "-c", _STREAMS_CHECK, str(streams), str(threads)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    assert float(got.stdout.strip().splitlines()[-1]) < 1e-4
