"""Decode attention's vector-tile products (engine/attention_ir.py) equal numpy's q K^T and p V,
for unrolled head sizes (16-128), the one-row fallback (80), tiles with a partial last tile,
scattered slots and a key count that is not a multiple of 4."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the intrinsics need numba")


@pytest.fixture(scope="module")
def both_products():
    from numba import njit

    from infercast.engine.attention_ir import intrinsics

    attn_scores, attn_pv = intrinsics()

    @njit
    def run(q, k, v, slots, li, g, scores, out):
        s_n, h_n, d = k.shape[1], k.shape[2], k.shape[3]
        for h in range(h_n):
            base = (li * s_n * h_n + h) * d
            attn_scores(q, k, base, h_n * d, slots, h * g, g, scores)
            attn_pv(scores, v, base, h_n * d, slots, h * g, g, out)

    return run


@pytest.mark.parametrize("hd", [16, 64, 80, 96, 128])
@pytest.mark.parametrize("g", [1, 3, 5])
@pytest.mark.parametrize("n_keys", [1, 7, 33])
def test_scores_and_weighted_values_equal_numpy(both_products, hd, g, n_keys):
    rng = np.random.default_rng(hd * 100 + g * 10 + n_keys)
    layers, slots_n, heads = 2, 40, 3
    k = rng.standard_normal((layers, slots_n, heads, hd)).astype(np.float32)
    v = rng.standard_normal((layers, slots_n, heads, hd)).astype(np.float32)
    q = rng.standard_normal((heads * g, hd)).astype(np.float32)
    slots = rng.permutation(slots_n)[:n_keys].astype(np.int64)
    scores = np.zeros((heads * g, n_keys), np.float32)
    out = np.zeros((heads * g, hd), np.float32)
    both_products(q, k, v, slots, 1, g, scores, out)
    want_s = np.concatenate([q[h * g : (h + 1) * g] @ k[1, slots, h].T for h in range(heads)])
    want_o = np.concatenate([want_s[h * g : (h + 1) * g] @ v[1, slots, h] for h in range(heads)])
    np.testing.assert_allclose(scores, want_s, rtol=0, atol=2e-5 * np.abs(want_s).max())
    np.testing.assert_allclose(out, want_o, rtol=0, atol=2e-5 * np.abs(want_o).max())
