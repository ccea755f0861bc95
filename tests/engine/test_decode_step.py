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
    run, run_logits = net.fused.run, net.fused.run_logits
    monkeypatch.setattr(net.fused, "run", lambda *a: called.append(1) or run(*a))
    monkeypatch.setattr(net.fused, "run_logits", lambda *a: called.append(2) or run_logits(*a))
    want, kv_want = _decode(net, False, monkeypatch)
    assert not called
    got, kv_got = _decode(net, True, monkeypatch)
    assert called == [2]  # the final norm and head in the fused call
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()
    assert np.abs(want).max() > 0.1
    for a, b in zip(kv_got.k + kv_got.v, kv_want.k + kv_want.v, strict=True):
        assert np.abs(a - b).max() < 1e-5 * max(1.0, np.abs(b).max())
        assert np.abs(b).max() > 0  # the decode's own K/V were written


@pytest.mark.parametrize("how", ["switched off", "float32 head"])
def test_fused_step_leaves_the_head_after_its_call(how, monkeypatch):
    """With ``HEAD_IN_STEP`` off, or a head the step's products cannot read (float32: no
    layout, :attr:`FusedDecode.head` None), the layers run fused and the final norm and head
    after the call, with the same logits as the head inside it."""
    import infercast.engine.decode_step as ds

    net = _model("int8", 2)
    want, _ = _decode(net, True, monkeypatch)
    if how == "switched off":
        monkeypatch.setattr(ds, "HEAD_IN_STEP", False)
    else:
        monkeypatch.setattr(net.fused, "head", None)
        monkeypatch.setattr(net.w, "lm_head", net.w.lm_head.dequantize())
    called = []
    run = net.fused.run
    monkeypatch.setattr(net.fused, "run", lambda *a: called.append(1) or run(*a))
    monkeypatch.setattr(net.fused, "run_logits", lambda *a: pytest.fail("head in the step"))
    got, _ = _decode(net, True, monkeypatch)
    assert called == [1]
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


def test_fused_step_runs_only_for_compact_layers_and_one_decoding_request(monkeypatch):
    """fp32 layers have no fused step; a step of two requests or a prefill runs the
    per-product path (the fused one is never called)."""
    assert _model("fp32", 1).fused is None
    net = _model("q4", 2)
    monkeypatch.setattr(net.fused, "run", lambda *a: pytest.fail("fused step ran"))
    kv = PagedKVStore(net.cfg, 12, 4)
    net.forward([SeqInput([1, 2, 3], 0, [0]), SeqInput([4, 5], 0, [1])], kv)
    out = net.forward([SeqInput([6], 3, [0]), SeqInput([7], 2, [1])], kv)
    assert len(out) == 2 and all(o.shape == (net.cfg.vocab_size,) for o in out)


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
