"""Model weights in the layout the forward pass uses, and seeded random weights.

Linear weights are stored ``[out_features, in_features]`` (the PyTorch/GGUF row
layout) and applied as ``x @ w.T``; BLAS reads the transpose without a copy.
Q, K and V are fused into one matrix and gate/up into another, so a layer runs
four matrix products instead of seven.

:func:`pack_weights` then copies every matrix a step streams into one 2 MiB-aligned
buffer, in the order the forward pass reads them: the kernel backs it with
transparent huge pages (numpy asks for them on large allocations), so a step's
weight stream takes few TLB misses and no page boundary breaks the prefetcher's
run between matrices. Measured on this machine (one thread, random-100m's 400 MB
of matrices, best of 9): the chain of batch-1 matrix-vector products ran at
16.2-16.4 GB/s over separately allocated matrices and 17.3-17.5 GB/s packed (one
400 MB matrix-vector product: 17.5 GB/s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.qformats import Rows, concat_rows

MATRICES = ("wqkv", "wo", "w_gate_up", "w_down")  # a layer's streamed matrices, in read order


@dataclass
class LayerWeights:
    """One decoder layer: float32 norms; matrices float32 arrays or compact matrices
    (:mod:`infercast.engine.qlinear`) after :func:`convert_weights`."""

    attn_norm: np.ndarray  # [hidden]
    wqkv: np.ndarray  # [q_size + 2 * kv_size, hidden]; Q/K rows in HF (rotate-half) order
    wo: np.ndarray  # [hidden, q_size]
    mlp_norm: np.ndarray  # [hidden]
    w_gate_up: np.ndarray  # [2 * intermediate, hidden]: gate rows then up rows
    w_down: np.ndarray  # [hidden, intermediate]


@dataclass
class ModelWeights:
    """All weights; ``lm_head`` is the embedding matrix itself when tied."""

    embed: np.ndarray  # [vocab, hidden]
    layers: list[LayerWeights]
    final_norm: np.ndarray  # [hidden]
    lm_head: np.ndarray  # [vocab, hidden]

    @property
    def nbytes(self) -> int:
        """Bytes read per forward step: every array once (a tied head counts once)."""
        arrays = [self.embed, self.final_norm]
        if self.lm_head is not self.embed:
            arrays.append(self.lm_head)
        for layer in self.layers:
            arrays += [
                layer.attn_norm,
                layer.wqkv,
                layer.wo,
                layer.mlp_norm,
                layer.w_gate_up,
                layer.w_down,
            ]
        return int(sum(a.nbytes for a in arrays))


HUGE_PAGE_BYTES = 2 * 2**20  # x86-64 transparent huge page


def _arena(num_floats: int) -> np.ndarray:
    """An uninitialised float32 buffer whose first element is huge-page aligned."""
    raw = np.empty(num_floats * 4 + HUGE_PAGE_BYTES, dtype=np.uint8)
    skip = -raw.ctypes.data % HUGE_PAGE_BYTES
    return raw[skip : skip + num_floats * 4].view(np.float32)


def pack_weights(w: ModelWeights) -> ModelWeights:
    """The same weights with every streamed matrix a view into one aligned buffer.

    Order: each layer's wqkv, wo, w_gate_up, w_down, then the head (the forward's
    read order). A tied embedding becomes the packed head. Takes ownership of
    ``w``: its layer list is emptied as the copy proceeds, so the peak memory is
    one model plus one layer, not two models.
    """
    fields = MATRICES
    total = sum(
        a.size for lw in w.layers for f in fields if isinstance(a := getattr(lw, f), np.ndarray)
    )
    total += w.lm_head.size if isinstance(w.lm_head, np.ndarray) else 0
    buf, at = _arena(total), 0

    def put(a):
        nonlocal at
        if not isinstance(a, np.ndarray):  # a compact matrix already owns its own buffer
            return a
        view = buf[at : at + a.size].reshape(a.shape)
        np.copyto(view, a)
        at += a.size
        return view

    layers = []
    while w.layers:
        lw = w.layers.pop(0)
        layers.append(
            LayerWeights(
                attn_norm=lw.attn_norm,
                mlp_norm=lw.mlp_norm,
                **{f: put(getattr(lw, f)) for f in fields},
            )
        )
    tied = w.lm_head is w.embed
    head = put(w.lm_head)
    return ModelWeights(
        embed=head if tied else w.embed, layers=layers, final_norm=w.final_norm, lm_head=head
    )


def layer_from_parts(q, k, v, o, gate, up, down, attn_norm, mlp_norm) -> LayerWeights:
    """Fuse separate projections (each [out, in]) into the engine's layout.

    float32 arrays stay float32 arrays; quantized rows (:mod:`infercast.engine.qformats`)
    are fused as they are, for :func:`convert_weights` to pack.
    """
    f32 = np.float32

    def one(a: Rows) -> Rows:
        return np.ascontiguousarray(a, dtype=f32) if isinstance(a, np.ndarray) else a

    return LayerWeights(
        attn_norm=np.asarray(attn_norm, dtype=f32),
        wqkv=concat_rows([q, k, v]),
        wo=one(o),
        mlp_norm=np.asarray(mlp_norm, dtype=f32),
        w_gate_up=concat_rows([gate, up]),
        w_down=one(down),
    )


def convert_weights(w: ModelWeights, convert: Callable[[Rows], object]) -> ModelWeights:
    """Every matrix (and the embedding) through ``convert``; a tied head stays tied.

    Takes ownership of ``w`` like :func:`pack_weights`: each layer's source rows are
    released as its converted matrices are made.
    """
    layers = []
    while w.layers:
        lw = w.layers.pop(0)
        parts = {f.name: getattr(lw, f.name) for f in fields(LayerWeights)}
        layers.append(
            LayerWeights(**{k: convert(v) if k in MATRICES else v for k, v in parts.items()})
        )
    embed = convert(w.embed)
    head = embed if w.lm_head is w.embed else convert(w.lm_head)
    return ModelWeights(embed=embed, layers=layers, final_norm=w.final_norm, lm_head=head)


def random_weights(cfg: EngineModelConfig, seed: int) -> ModelWeights:
    """Seeded random weights: std 0.02 matrices (GPT-2's init scale), norms around 1.

    Norm gains get a little noise so a bug that mixes up which norm is applied
    where changes the output (all-ones gains would hide it).
    """
    rng = np.random.default_rng(seed)
    h, std = cfg.hidden_size, 0.02

    def mat(rows: int, cols: int) -> np.ndarray:
        # Uniform with the same std (half-width std*sqrt(3)): 3x faster than normal
        # draws, which matters for the 1.1B-parameter size.
        a = np.float32(std * np.sqrt(3.0))
        m = rng.random((rows, cols), dtype=np.float32)
        m *= 2 * a
        m -= a
        return m

    def gain() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(h, dtype=np.float32)).astype(np.float32)

    layers = []
    for _ in range(cfg.num_layers):
        layers.append(
            LayerWeights(
                attn_norm=gain(),
                wqkv=mat(cfg.q_size + 2 * cfg.kv_size, h),
                wo=mat(h, cfg.q_size),
                mlp_norm=gain(),
                w_gate_up=mat(2 * cfg.intermediate_size, h),
                w_down=mat(h, cfg.intermediate_size),
            )
        )
    embed = (rng.standard_normal((cfg.vocab_size, h), dtype=np.float32)).astype(np.float32)
    head = embed if cfg.tie_word_embeddings else mat(cfg.vocab_size, h)
    return ModelWeights(embed=embed, layers=layers, final_norm=gain(), lm_head=head)


def dense_weights(w: ModelWeights) -> ModelWeights:
    """float32 arrays of every matrix (compact ones dequantized); ``w`` is left as it is."""

    def widen(a):
        return a if isinstance(a, np.ndarray) else a.dequantize()

    return convert_weights(ModelWeights(w.embed, list(w.layers), w.final_norm, w.lm_head), widen)
