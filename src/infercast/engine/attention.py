"""Causal grouped-query attention on feature-major activations.

The forward pass keeps activations as ``[features, tokens]``
(:func:`infercast.engine.linear.linear_fm`), so queries arrive as ``[Hq, d,
n]`` and attention writes ``[Hq, d, n]`` back into the output projection's
input. Each KV head serves g = Hq/Hkv query heads (Ainslie et al. 2023): its g
heads' queries are the columns of one ``[d, g*n]`` matrix, so scores are one
product ``K_h [ctx, d] @ Q_h [d, g*n]`` per KV head, with no K/V repetition.

Decode tokens (one new token per request) of many requests run together:
their contexts are gathered into one padded ``[B, L, Hkv, d]`` array and the
padding masked, instead of a dozen small numpy calls per request per layer
(batch 32 at 128 cached tokens, attention with its KV gathers per step:
random-100m 17.7 -> 14.2 ms, SmolLM2 42.6 -> 35.5 ms; what remains is mostly
the gather, a copy at this machine's ~7 GB/s copy rate).

Prefills attend in query blocks of 32: block [i, j) reads keys up to start + j
only, so less of the causal mask's upper half is computed. One layer's
attention, one thread, best of 40, us, blocks of 32 / 64 / 128: random-100m at
128 tokens 457 / 547 / 689, at 512 6054 / 6018 / 6830; SmolLM2 at 128 348 /
379 / 484, at 512 4308 / 4357 / 4873.

The softmax's sums come out of the PV product (a row of ones under V) instead
of a pass over the scores, and the scores are not floored against float32
subnormals (exp below -87.3; arithmetic on them runs ~13x slower here):
SmolLM2's attention on a real prompt had no score below -47 after the max was
subtracted. One layer's attention, one thread, best of 30: SmolLM2 at 512
tokens 5.0 -> 4.4-4.7 ms, at 128 0.44 -> 0.41 ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

QUERY_BLOCK = 32  # prefills attend in query blocks, each to the keys it can see (see below)
PAD_WASTE = 1.25  # a decode group's padded keys may exceed its real keys by this factor
MIN_RUN_BLOCKS = 3  # shorter runs of consecutive KV blocks are gathered (see DecodeGroup)


@dataclass(frozen=True)
class PrefillSpan:
    """One request's several new tokens in a step, and its causal masks.

    The masks depend only on positions, so they are built once per step and
    serve every layer: one per query block [i, j), additive (-inf on future
    keys), over the block's own keys start + i .. start + j - 1 only (every
    query sees the keys before them), ``[j - i, g * (j - i)]`` to match the
    scores' ``(g, n)`` column order.
    """

    columns: slice  # the request's token columns in the step
    start: int  # tokens already cached (positions start .. start + n - 1 are new)
    slots: np.ndarray  # flat KV slots of positions 0 .. start + n - 1
    blocks: tuple[tuple[int, int, np.ndarray], ...]  # (i, j, diagonal mask) per query block

    @staticmethod
    def build(columns: slice, start: int, slots: np.ndarray, group: int) -> PrefillSpan:
        n = columns.stop - columns.start
        blocks = []
        for i in range(0, n, QUERY_BLOCK):
            j = min(i + QUERY_BLOCK, n)
            future = np.arange(j - i)[:, None] > np.arange(j - i)[None, :]
            mask = np.where(future, np.float32(-np.inf), np.float32(0.0))
            blocks.append((i, j, np.tile(mask, (1, group))))
        return PrefillSpan(columns, start, slots, tuple(blocks))


def causal_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, span: PrefillSpan, out: np.ndarray
) -> None:
    """Attention of n new queries at positions start.. over ctx = start + n keys.

    q [Hq, d, n]; k [Hkv, ctx, d]; v [Hkv, d, ctx] (views are fine); writes out
    [Hq, d, n]. Queries go in blocks of QUERY_BLOCK; block [i, j) only reads
    keys 0 .. start + j - 1, which skips most of the masked half of a long prefill.
    """
    hkv, d, ctx = v.shape
    v1 = np.empty((hkv, d + 1, ctx), dtype=np.float32)  # V with a row of ones: see below
    v1[:, :d] = v
    v1[:, d] = 1.0
    for i, j, mask in span.blocks:
        ctx = span.start + j
        _attention_block(q[..., i:j], k[:, :ctx], v1[..., :ctx], mask, out[..., i:j])


def _attention_block(
    q: np.ndarray, k: np.ndarray, v1: np.ndarray, mask: np.ndarray, out: np.ndarray
) -> None:
    """One query block (see :func:`causal_attention`); v1 is V [Hkv, d, ctx] plus a row of ones.

    The 1/sqrt(d) scale goes on q (as it is copied into the grouped layout) and
    the softmax's division on the ``[d, g*n]`` output, the smaller arrays. The
    softmax's denominators come out of the PV product as its last row (V's row
    of ones) instead of a pass over the scores.
    """
    hq, d, n = q.shape
    hkv = k.shape[0]
    g = hq // hkv
    qg = np.empty((hkv, d, g, n), dtype=np.float32)
    np.multiply(q.reshape(hkv, g, d, n).transpose(0, 2, 1, 3), np.float32(1.0 / np.sqrt(d)), out=qg)
    scores = k @ qg.reshape(hkv, d, g * n)  # [Hkv, ctx, g*n]
    scores[:, -n:] += mask  # the block's own keys are the last n
    scores -= scores.max(axis=1, keepdims=True)
    np.exp(scores, out=scores)
    o = (v1 @ scores).reshape(hkv, d + 1, g, n)  # [Hkv, d + 1, g*n]: PV, then the sums
    np.divide(
        o[:, :d].transpose(0, 2, 1, 3),
        o[:, d:].transpose(0, 2, 1, 3),
        out=out.reshape(hkv, g, d, n),
    )


@dataclass(frozen=True)
class DecodeGroup:
    """Decode requests attended together: their columns and where each one's keys lie.

    A request's keys are read as *segments* of the flat KV store, whole blocks
    at a time: each run of at least MIN_RUN_BLOCKS consecutive block ids is a
    slice (a view: no copy), the request's other blocks one index array of
    their slots (gathered, a copy). A decode query sees every cached key, so
    the order of keys does not matter and runs are found among the sorted block
    ids (the KV manager hands out a prompt's blocks in descending order). The
    rows past the context in its last block, and the padding up to the group's
    widest request, are masked; the store is zero-initialised and only ever
    holds finite K/V, so their zero weights multiply finite values.
    """

    columns: np.ndarray  # [B] token columns of the step
    segments: tuple[tuple[slice | np.ndarray, ...], ...]  # per request, in score-column order
    mask: np.ndarray | None  # [B, 1, 1, W] additive: -inf on unused rows and padding
    width: int  # W: score columns (the widest request's segments)


def decode_groups(
    columns: Sequence[int],
    tables: Sequence[Sequence[int]],
    contexts: Sequence[int],
    block_size: int,
) -> list[DecodeGroup]:
    """Group decode requests so padding to a group's longest context stays small.

    ``tables[i]``: request i's block table, ``contexts[i]``: its keys (cached +
    the new token). Requests sorted by context join a group while its padded
    size stays within PAD_WASTE of its real keys; built once per step, used by
    every layer.
    """
    order = sorted(range(len(columns)), key=lambda i: contexts[i])
    groups: list[list[int]] = []
    real = 0
    for i in order:
        ctx = contexts[i]
        if groups and (len(groups[-1]) + 1) * ctx <= PAD_WASTE * (real + ctx):
            groups[-1].append(i)
            real += ctx
        else:
            groups.append([i])
            real = ctx
    return [
        _group(
            [columns[i] for i in g], [tables[i] for i in g], [contexts[i] for i in g], block_size
        )
        for g in groups
    ]


def _group(
    columns: list[int], tables: list[Sequence[int]], contexts: list[int], block_size: int
) -> DecodeGroup:
    parts = [segments(t, c, block_size) for t, c in zip(tables, contexts, strict=True)]
    width = max(len(valid) for _, valid in parts)
    valid = np.zeros((len(parts), width), dtype=bool)
    for row, (_, v) in enumerate(parts):
        valid[row, : len(v)] = v
    mask = None
    if not valid.all():
        mask = np.where(valid, np.float32(0.0), np.float32(-np.inf))[:, None, None, :]
    return DecodeGroup(np.array(columns), tuple(segs for segs, _ in parts), mask, width)


def segments(
    table: Sequence[int], context: int, block_size: int
) -> tuple[tuple[slice | np.ndarray, ...], np.ndarray]:
    """A request's KV as segments (see :class:`DecodeGroup`) and which of their rows are keys."""
    nb = -(-context // block_size)
    blocks = np.asarray(table[:nb], dtype=np.int64)
    last = int(blocks[-1])  # holds positions (nb - 1) * block_size .. context - 1
    order = np.sort(blocks)
    cut = np.flatnonzero(np.diff(order) != 1) + 1
    starts, stops = np.r_[0, cut], np.r_[cut, nb]
    long = stops - starts >= MIN_RUN_BLOCKS
    segs: list[slice | np.ndarray] = [
        slice(int(order[a]) * block_size, (int(order[b - 1]) + 1) * block_size)
        for a, b in zip(starts[long], stops[long], strict=True)
    ]
    seg_blocks = [order[a:b] for a, b in zip(starts[long], stops[long], strict=True)]
    if not long.all():
        rest = np.concatenate(
            [order[a:b] for a, b in zip(starts[~long], stops[~long], strict=True)]
        )
        segs.append((rest[:, None] * block_size + np.arange(block_size)).ravel())
        seg_blocks.append(rest)
    ids = np.concatenate(seg_blocks)
    valid = np.ones((nb, block_size), dtype=bool)
    valid[ids == last, context - (nb - 1) * block_size :] = False
    return tuple(segs), valid.ravel()


def decode_attention(
    q: np.ndarray, k_flat: np.ndarray, v_flat: np.ndarray, group: DecodeGroup, out: np.ndarray
) -> None:
    """Attention of one new token per request for a group of decode requests (numpy).

    Without numba only: with it, decode attention is one compiled loop per layer
    (:mod:`infercast.engine.decode_jit`, tested equal to this).

    q, out [Hq, d, T] (the step's feature-major queries and attention output);
    k_flat, v_flat [slots, Hkv, d] (one layer of the paged store, flat). Scores
    and P @ V run per request and segment on views of the store (K [l, Hkv, d]
    read as [Hkv, d, l]: BLAS takes the strides as they are); the softmax runs
    on the group's masked [B, Hkv, g, W] scores at once.
    """
    hq, d, _ = q.shape
    hkv = k_flat.shape[1]
    b, g = len(group.columns), hq // hkv
    qd = np.empty((b, hkv, g, d), dtype=np.float32)
    np.multiply(
        q[:, :, group.columns].transpose(2, 0, 1),
        np.float32(1.0 / np.sqrt(d)),
        out=qd.reshape(b, hq, d),
    )
    scores = np.empty((b, hkv, g, group.width), dtype=np.float32)
    for i, segs in enumerate(group.segments):
        at = 0
        for seg in segs:
            keys = k_flat[seg]  # [l, Hkv, d]: a view for a run, a copy for the rest
            np.matmul(qd[i], keys.transpose(1, 2, 0), out=scores[i, ..., at : at + len(keys)])
            at += len(keys)
        if at < group.width:
            scores[i, ..., at:] = 0.0  # padding: finite, then masked
    if group.mask is not None:
        scores += group.mask
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    denom = scores.sum(axis=-1, keepdims=True)
    o = np.empty((b, hkv, g, d), dtype=np.float32)
    for i, segs in enumerate(group.segments):
        at = 0
        for j, seg in enumerate(segs):
            values = v_flat[seg].transpose(1, 0, 2)  # [Hkv, l, d]
            p = scores[i, ..., at : at + values.shape[1]]
            if j == 0:
                np.matmul(p, values, out=o[i])
            else:
                o[i] += p @ values
            at += values.shape[1]
    o /= denom
    out[:, :, group.columns] = o.reshape(b, hq, d).transpose(1, 2, 0)
