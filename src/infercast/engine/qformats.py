"""Quantized weight rows in numpy: GGUF blocks read exactly, fp32 matrices quantized.

Two group-of-32 representations, both row-major ``[out, in]`` like the float32
weights, so the loaders can permute and concatenate rows (Q/K/V and gate/up
fusion) before the kernels pack them (:mod:`infercast.engine.qlinear`):

- :class:`Q4Rows`: ``w[n, k] = (q[n, k] - 8) * scale[n, g] + zero[n, g]``,
  ``g = k // 32``, ``q`` in 0..15: PyTorch's CPU int4 convention
  (``_weight_int4pack_mm_for_cpu``). GGUF's Q4_0 (``w = (q - 8) d``) is
  ``scale = d, zero = 0``; Q4_1 (``w = q d + m``) is ``scale = d, zero = m + 8 d``
  (block layouts: ggml's ``block_q4_0``/``block_q4_1`` in ``ggml-common.h``: an
  fp16 ``d`` (and ``m``), then 16 bytes whose low nibbles are elements 0-15 and
  high nibbles elements 16-31).
- :class:`Q8Rows`: ``w[n, k] = q[n, k] * scale[n, g]``, ``q`` int8: GGUF's Q8_0
  (``block_q8_0``: fp16 ``d``, then 32 int8).

Quantizing float32 to 4 bits follows Q4_1 (per group: ``d = (max - min) / 15``,
``q = round((w - min) / d)``); to 8 bits, symmetric per output row
(``s = max|w| / 127``), the layout of PyTorch's ``_weight_int8pack_mm``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Self

import numpy as np

from infercast.errors import ModelConfigError

GROUP = 32  # weights per quantization group (ggml's QK4_0 = QK4_1 = QK8_0 = 32)


class _GroupRows:
    """What both representations share: the ``[N, K]`` shape of ``q``, and row reordering."""

    q: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.q.shape

    def map_rows(self, fn: Callable[[np.ndarray], np.ndarray]) -> Self:
        """The same rows reordered by ``fn`` (applied to every array alike: q, scale, zero)."""
        return type(self)(*(fn(getattr(self, f.name)) for f in fields(self)))


@dataclass
class Q4Rows(_GroupRows):
    """4-bit affine groups of 32 (see the module doc); q uint8 [N, K], scale/zero f32 [N, K/32]."""

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray

    def dequantize(self) -> np.ndarray:
        n, k = self.q.shape
        w = self.q.reshape(n, k // GROUP, GROUP).astype(np.float32) - 8.0
        w *= self.scale[:, :, None]
        w += self.zero[:, :, None]
        return w.reshape(n, k)


@dataclass
class Q8Rows(_GroupRows):
    """8-bit symmetric groups of 32; q int8 [N, K], scale f32 [N, K/32]."""

    q: np.ndarray
    scale: np.ndarray

    def dequantize(self) -> np.ndarray:
        n, k = self.q.shape
        w = self.q.reshape(n, k // GROUP, GROUP).astype(np.float32)
        w *= self.scale[:, :, None]
        return w.reshape(n, k)


Rows = np.ndarray | Q4Rows | Q8Rows


def _blocks(data: np.ndarray, rows: int, block_bytes: int) -> np.ndarray:
    return np.asarray(data, dtype=np.uint8).reshape(rows, -1, block_bytes)


def _f16(b: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(b).view(np.float16)[..., 0].astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """[N, G, 16] bytes -> [N, G * 32] values: low nibbles first, then high (ggml's order)."""
    q = np.concatenate([qs & 15, qs >> 4], axis=2)
    return q.reshape(qs.shape[0], -1)


def q4_0_rows(data: np.ndarray, rows: int) -> Q4Rows:
    """GGUF Q4_0 blocks (18 bytes: fp16 d, 16 bytes of nibbles) of a [rows, K] tensor."""
    b = _blocks(data, rows, 18)
    d = _f16(b[..., 0:2])
    return Q4Rows(_nibbles(b[..., 2:]), d, np.zeros_like(d))


def q4_1_rows(data: np.ndarray, rows: int) -> Q4Rows:
    """GGUF Q4_1 blocks (20 bytes: fp16 d, fp16 m, 16 bytes of nibbles)."""
    b = _blocks(data, rows, 20)
    d, m = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    return Q4Rows(_nibbles(b[..., 4:]), d, m + 8.0 * d)


def q8_0_rows(data: np.ndarray, rows: int) -> Q8Rows:
    """GGUF Q8_0 blocks (34 bytes: fp16 d, 32 int8)."""
    b = _blocks(data, rows, 34)
    q = np.ascontiguousarray(b[..., 2:]).view(np.int8).reshape(rows, -1)
    return Q8Rows(q, _f16(b[..., 0:2]))


def quantize_q4(w: np.ndarray) -> Q4Rows:
    """Q4_1-style 4-bit groups of 32 of a float32 [N, K] matrix (K a multiple of 32)."""
    n, k = _check_groups(w)
    g = w.reshape(n, k // GROUP, GROUP).astype(np.float32)
    lo, hi = g.min(axis=2), g.max(axis=2)
    d = (hi - lo) / np.float32(15.0)
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    q = np.clip(np.rint((g - lo[:, :, None]) * inv[:, :, None]), 0, 15).astype(np.uint8)
    return Q4Rows(q.reshape(n, k), d, lo + 8.0 * d)


def quantize_int8_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output row: (q int8 [N, K], scale f32 [N]); w ~ q * scale[:, None]."""
    w = np.asarray(w, dtype=np.float32)
    s = np.abs(w).max(axis=1) / np.float32(127.0)
    inv = np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)
    q = np.clip(np.rint(w * inv[:, None]), -127, 127).astype(np.int8)
    return q, s.astype(np.float32)


def _check_groups(w: np.ndarray) -> tuple[int, int]:
    n, k = w.shape
    if k % GROUP:
        raise ModelConfigError(
            f"a {n}x{k} matrix cannot be quantized in groups of {GROUP}: "
            f"its {k} columns are not a multiple of {GROUP}; use `weights` fp32"
        )
    return n, k


def dense(w: Rows) -> np.ndarray:
    """float32 [N, K] of any row representation."""
    return w if isinstance(w, np.ndarray) else w.dequantize()


def map_rows(w: Rows, fn: Callable[[np.ndarray], np.ndarray]) -> Rows:
    """Reorder rows of a float32 array or quantized rows alike."""
    return fn(w) if isinstance(w, np.ndarray) else w.map_rows(fn)


def concat_rows(parts: list[Rows]) -> Rows:
    """Stack row representations of one kind (fusing Q/K/V or gate/up)."""
    kinds = {type(p) for p in parts}
    if len(kinds) > 1:  # mixed formats in one fused matrix: widen all to float32
        parts = [dense(p) for p in parts]
    first = parts[0]
    if isinstance(first, Q4Rows):
        return Q4Rows(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in ("q", "scale", "zero"))
        )
    if isinstance(first, Q8Rows):
        return Q8Rows(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("q", "scale")))
    return np.ascontiguousarray(np.concatenate(parts, axis=0), dtype=np.float32)
