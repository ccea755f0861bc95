"""Quantized rows: GGUF blocks read exactly as gguf's own dequantizer reads them; quantizers."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from infercast.engine.qformats import (  # noqa: E402
    Q4Rows,
    concat_rows,
    map_rows,
    q4_0_rows,
    q4_1_rows,
    q8_0_rows,
    quantize_int8_rows,
    quantize_q4,
)
from infercast.errors import ModelConfigError  # noqa: E402

READERS = {"Q4_0": q4_0_rows, "Q4_1": q4_1_rows, "Q8_0": q8_0_rows}


@pytest.mark.parametrize("qtype", sorted(READERS))
def test_block_readers_agree_with_gguf_dequantize(qtype):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((48, 96)).astype(np.float32) * 0.05
    t = getattr(gguf.GGMLQuantizationType, qtype)
    blocks = gguf.quants.quantize(w, t)
    ref = gguf.quants.dequantize(blocks, t)
    got = READERS[qtype](blocks, 48)
    assert got.shape == (48, 96)
    np.testing.assert_array_equal(got.dequantize(), ref)


def test_quantize_q4_is_within_half_a_step_of_each_weight():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    q = quantize_q4(w)
    step = q.scale.repeat(32, axis=1)  # d per weight
    assert np.all(np.abs(q.dequantize() - w) <= step / 2 + 1e-6)
    assert q.q.max() <= 15


def test_quantize_q4_refuses_columns_not_in_groups_of_32():
    with pytest.raises(ModelConfigError, match="multiple of 32"):
        quantize_q4(np.ones((4, 40), dtype=np.float32))


def test_int8_rows_round_trip_within_half_a_step():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 64)).astype(np.float32)
    q, s = quantize_int8_rows(w)
    assert np.all(np.abs(q * s[:, None] - w) <= s[:, None] / 2 + 1e-6)


def test_rows_concatenate_and_permute_like_their_dense_matrices():
    rng = np.random.default_rng(4)
    a, b = (quantize_q4(rng.standard_normal((n, 32)).astype(np.float32)) for n in (4, 6))
    both = concat_rows([a, b])
    assert isinstance(both, Q4Rows)
    np.testing.assert_array_equal(
        both.dequantize(), np.concatenate([a.dequantize(), b.dequantize()])
    )
    rev = map_rows(a, lambda x: x[::-1])
    np.testing.assert_array_equal(rev.dequantize(), a.dequantize()[::-1])
    mixed = concat_rows([a, np.ones((2, 32), dtype=np.float32)])  # widened to float32
    assert isinstance(mixed, np.ndarray) and mixed.shape == (6, 32)
