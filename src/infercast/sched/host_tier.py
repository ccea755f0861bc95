"""A second KV tier in host memory: the blocks HBM's prefix cache evicts, kept by content hash.

Hardware-free bookkeeping, like ``kv_cache.py``: a block is its hash here. Design after
LMCache and vLLM's CPU KV offloading (``--kv-offloading-size``): a registered block that the
HBM pool evicts is stored in host memory instead of being dropped; a later request whose
prefix continues past the blocks still in HBM finds the rest here, and those blocks are
copied back into fresh HBM blocks (re-registered, so the scheduler shares them like any
prefix hit) instead of being recomputed. The copies are counted (``take_loaded``) for the
step timer, which charges them at the host link's bandwidth (``cost/kv_tier.py``).

Host memory is finite too: least recently stored or used blocks are dropped first.
Preempted requests' own (unhashed) blocks are not swapped here: they recompute, as with
vLLM v1's preemption (v0's swap mode is not modelled).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from infercast.errors import ConfigError


class HostTier:
    """An LRU set of block hashes held in host memory (``capacity_blocks`` of them)."""

    def __init__(self, capacity_blocks: int):
        if capacity_blocks < 1:
            raise ConfigError(f"host KV tier of {capacity_blocks} blocks: need at least 1 block")
        self.capacity_blocks = capacity_blocks
        self._held: OrderedDict[int, None] = OrderedDict()
        self.num_stored = 0  # blocks written to host (HBM evictions)
        self.num_loaded = 0  # blocks copied back to HBM, over the run
        self.num_dropped = 0  # blocks host memory had to drop
        self._pending = 0  # copied back since the step timer last asked

    def store(self, block_hash: int) -> None:
        """Keep an evicted block's content (most recently used end)."""
        held = self._held
        if block_hash in held:
            held.move_to_end(block_hash)
            return
        held[block_hash] = None
        self.num_stored += 1
        if len(held) > self.capacity_blocks:
            held.popitem(last=False)
            self.num_dropped += 1

    def match(self, block_hashes: Sequence[int]) -> int:
        """How many of ``block_hashes``, from the first, host memory holds."""
        n = 0
        for h in block_hashes:
            if h not in self._held:
                break
            self._held.move_to_end(h)
            n += 1
        return n

    def loaded(self, n: int) -> None:
        """``n`` blocks were copied back to HBM (for the step timer and the run's totals)."""
        self.num_loaded += n
        self._pending += n

    def take_loaded(self) -> int:
        """Blocks copied back since the last call (the step about to run waits for them)."""
        n, self._pending = self._pending, 0
        return n
