"""Paged KV storage: the arrays behind the scheduler's block tables.

The scheduler's KV manager hands out block ids; this module owns the memory.
Per layer, K and V are ``[num_blocks, block_size, kv_heads, head_dim]`` float32,
so token position p of a request lives in block ``block_table[p // block_size]``
at row ``p % block_size`` (the vLLM PagedAttention layout, Kwon et al. 2023).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.engine.config import EngineModelConfig


class PagedKVStore:
    """K/V arrays for every layer, addressed through block tables."""

    def __init__(self, cfg: EngineModelConfig, num_blocks: int, block_size: int) -> None:
        shape = (num_blocks, block_size, cfg.num_kv_heads, cfg.head_dim)
        self.block_size = block_size
        self.num_blocks = num_blocks
        # One array per kind for every layer; ``k[layer]`` is a view of it (the fused decode
        # step, engine/decode_step.py, reads all layers through the stacked array).
        self.k_all = np.zeros((cfg.num_layers, *shape), dtype=np.float32)
        self.v_all = np.zeros((cfg.num_layers, *shape), dtype=np.float32)
        self.k = list(self.k_all)
        self.v = list(self.v_all)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.k) + sum(a.nbytes for a in self.v))

    @staticmethod
    def bytes_per_token(cfg: EngineModelConfig) -> int:
        """K and V, every layer, float32: 2 * layers * kv_heads * head_dim * 4 bytes."""
        return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 4

    def slots(self, block_table: Sequence[int], start: int, stop: int) -> np.ndarray:
        """Flat row indices (block * block_size + offset) of positions start..stop-1."""
        pos = np.arange(start, stop)
        blocks = np.asarray(block_table, dtype=np.int64)[pos // self.block_size]
        return blocks * self.block_size + pos % self.block_size

    def write(self, layer: int, slots: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        """Store k, v [tokens, kv_heads, head_dim] at the given flat slots."""
        self._flat(self.k[layer])[slots] = k
        self._flat(self.v[layer])[slots] = v

    def read(self, layer: int, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gather K, V [len(slots), kv_heads, head_dim] (a copy) for one request."""
        return self._flat(self.k[layer])[slots], self._flat(self.v[layer])[slots]

    def flat(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """K, V of one layer as [num_blocks * block_size, kv_heads, head_dim] views."""
        return self._flat(self.k[layer]), self._flat(self.v[layer])

    @staticmethod
    def _flat(a: np.ndarray) -> np.ndarray:
        return a.reshape(a.shape[0] * a.shape[1], *a.shape[2:])  # a view: arrays are contiguous
