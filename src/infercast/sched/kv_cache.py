"""Paged KV cache bookkeeping: fixed-size blocks, a free pool, ref counts, prefix cache.

No tensors here: a block is an integer id; the engine maps ids to memory, the
simulator only counts them. Design after vLLM v1's ``KVCacheManager``:

- A request's ``block_table`` lists the blocks holding its positions
  ``0 .. n-1`` (block ``i`` holds positions ``i*block_size .. (i+1)*block_size-1``).
- :meth:`BlockManager.take` and :meth:`BlockManager.give` are the only ways
  in and out of the free pool. Taking is all-or-nothing: ``take`` returns
  ``None`` and changes nothing when too few blocks are free; the scheduler then
  preempts and retries.
- Prefix caching: a full prompt block whose content hash is known is
  *registered* (hash -> block). A later request whose leading block hashes
  match reuses those blocks (ref count + 1) instead of recomputing them. A
  block whose ref count drops to 0 keeps its hash and stays reusable until the
  pool needs it back; those "cached free" blocks are evicted least recently
  freed first, and only after the plain free blocks are used up.
- Reference counts are kept only for blocks in the prefix index (registered):
  only those can be shared, so every other block in use has exactly one
  reference and goes straight back to the free pool. A run with nothing to
  share pays for no counting (callers say how many leading blocks of a table
  may be indexed: ``give(blocks, indexable)``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from infercast.errors import ConfigError
from infercast.sched.host_tier import HostTier


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative ints."""
    return -(-a // b)


def hash_token_blocks(token_ids: Sequence[int], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the full blocks of ``token_ids`` (partial tail block excluded).

    Hash i covers tokens ``0 .. (i+1)*block_size-1`` through the chain, as in
    vLLM's prefix caching, so equal hashes mean equal prefixes. Python's
    ``hash`` of int tuples is not salted, so hashes are stable across runs.
    """
    hashes: list[int] = []
    prev = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        prev = hash((prev, tuple(token_ids[start : start + block_size])))
        hashes.append(prev)
    return tuple(hashes)


def extend_block_hashes(hashes: list[int], token_ids: Sequence[int], block_size: int) -> None:
    """Append to ``hashes`` (those of the first full blocks of ``token_ids``) the rest of the chain.

    For a sequence that grows as it decodes: afterwards ``hashes`` equals
    ``hash_token_blocks(token_ids, block_size)``, so an answer's blocks can be found by
    the next turn of a conversation, whose prompt repeats them.
    """
    prev = hashes[-1] if hashes else 0
    for start in range(len(hashes) * block_size, len(token_ids) - block_size + 1, block_size):
        prev = hash((prev, tuple(token_ids[start : start + block_size])))
        hashes.append(prev)


def synthetic_block_hashes(
    prefix_group: int, prefix_tokens: int, block_size: int
) -> tuple[int, ...]:
    """Block hashes of a shared prefix without token ids (the simulator's stand-in).

    Requests with the same ``prefix_group`` share their first ``prefix_tokens``
    tokens; the hash of block i is a function of (group, i) only, which is
    what a chained hash of identical token blocks would give. The request's
    own tokens after the prefix are unique, so they get no hash (never shared).
    """
    return tuple(hash(("prefix", prefix_group, i)) for i in range(prefix_tokens // block_size))


class BlockManager:
    """Free pool, ref counts and prefix-cache index of one replica's KV blocks."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = False,
        host_tier: HostTier | None = None,
    ):
        if num_blocks < 1:
            raise ConfigError(f"num_blocks={num_blocks}: need at least 1 KV block")
        if block_size < 1:
            raise ConfigError(f"block_size={block_size}: must be a positive number of tokens")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        if host_tier is not None and not enable_prefix_caching:
            raise ConfigError("a host KV tier keeps prefix-cache blocks: turn prefix caching on")
        self.host_tier = host_tier  # evicted blocks go there (sched/host_tier.py); None = dropped
        # Plain free blocks, used as a stack (last freed is reused first: cheap slicing). Its
        # bottom holds the never-used blocks ``_fresh .. num_blocks - 1``, highest first, as
        # ``list(range(num_blocks - 1, -1, -1))`` would, without building it (a decode pool of
        # many GPUs has tens of millions of blocks); ``_free`` is the part above them.
        self._free: list[int] = []
        self._fresh = 0
        # Free blocks that still hold a registered prefix; insertion order = LRU order.
        self._cached_free: OrderedDict[int, None] = OrderedDict()
        # Ref counts of the registered blocks (those in ``_block_to_hash``): only they can be
        # shared (a hit is a registered block), so an unregistered block is referenced once
        # while taken and not at all while free (see ``ref_counts``).
        self._refs: dict[int, int] = {}
        self._hash_to_block: dict[int, int] = {}
        self._block_to_hash: dict[int, int] = {}
        self.num_evictions = 0
        # Blocks ``take`` can hand out now (plain free + evictable cached): read-only for callers.
        # A counter kept by take/give/share, not a property: the schedulers read it every step.
        self.num_free_blocks = num_blocks

    @property
    def ref_counts(self) -> list[int]:
        """References per block (a fresh list: 0 free, 1 taken, a registered block's count)."""
        refs = [1] * self._fresh + [0] * (self.num_blocks - self._fresh)
        for block in self._free:
            refs[block] = 0
        for block, ref in self._refs.items():  # cached free blocks are registered, with 0
            refs[block] = ref
        return refs

    def num_cached_free(self, blocks: Sequence[int]) -> int:
        """How many of these registered blocks (prefix hits) sit in the free pool: sharing
        them takes them out of it."""
        refs = self._refs
        return sum(1 for b in blocks if refs[b] == 0)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    @property
    def usage(self) -> float:
        """Fraction of blocks referenced by some request (0..1)."""
        return (self.num_blocks - self.num_free_blocks) / self.num_blocks

    def take(self, n: int) -> list[int] | None:
        """``n`` blocks with ref count 1, or None (and nothing changes) when too few are free."""
        if n <= 0:
            return []
        free = self._free
        i = len(free) - n
        if i >= 0:  # the common case, in one slice (no count: a fresh block is unregistered)
            blocks = free[i:]
            del free[i:]
            self.num_free_blocks -= n
            return blocks
        k = i + n
        lo = self._fresh
        fresh = self.num_blocks - lo
        if n > k + fresh + len(self._cached_free):
            return None
        self.num_free_blocks -= n
        j = min(n - k, fresh)  # from the stack's bottom: the top j never-used blocks, then ``free``
        blocks = list(range(lo + j - 1, lo - 1, -1))
        self._fresh = lo + j
        blocks += free
        del free[:]
        for _ in range(n - k - j):  # evict least recently freed cached blocks
            block, _ = self._cached_free.popitem(last=False)
            del self._refs[block]
            evicted = self._block_to_hash.pop(block)
            del self._hash_to_block[evicted]
            if self.host_tier is not None:
                self.host_tier.store(evicted)
            self.num_evictions += 1
            blocks.append(block)
        return blocks

    def give(self, blocks: Sequence[int], indexable: int | None = None) -> None:
        """Drop one reference to each block; blocks reaching 0 return to the pool.

        ``indexable``: how many leading blocks may be in the prefix index (a request's
        ``len(block_hashes)``: no block past its hashes is ever registered); default all.
        The others were never registered, so they hold one reference each and go back at once.
        With prefix caching, freed in reverse so a request's tail blocks (least likely
        shared) are evicted before its head blocks, as vLLM does. Without it no block
        is ever reused by content, so their order on the free stack does not matter:
        they go back as they are (a reversed copy costs as much as the extend).
        """
        if not self.enable_prefix_caching:
            self._free.extend(blocks)
            self.num_free_blocks += len(blocks)
            return
        n = len(blocks)
        k = n if indexable is None or indexable >= n else indexable
        free = self._free
        if k < n:  # the unindexed tail, last block first
            free.extend(reversed(blocks[k:]) if k else reversed(blocks))
            self.num_free_blocks += n - k
        if not k:
            return
        refs, hashed, cached = self._refs, self._block_to_hash, self._cached_free
        for block in reversed(blocks[:k]):
            if block in hashed:
                ref = refs[block] - 1
                refs[block] = ref
                if ref == 0:
                    self.num_free_blocks += 1
                    cached[block] = None
                elif ref < 0:
                    raise RuntimeError(f"KV block {block} freed more often than allocated")
            else:
                free.append(block)
                self.num_free_blocks += 1

    def match_prefix(self, block_hashes: Sequence[int], max_blocks: int) -> list[int]:
        """The longest run of leading blocks already cached (at most ``max_blocks``)."""
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        for h in block_hashes[:max_blocks]:
            block = self._hash_to_block.get(h)
            if block is None:
                break
            hits.append(block)
        if self.host_tier is not None and len(hits) < min(max_blocks, len(block_hashes)):
            hits += self._restore(self.host_tier, block_hashes[len(hits) : max_blocks], hits)
        return hits

    def _restore(self, tier: HostTier, block_hashes: Sequence[int], pinned: list[int]) -> list[int]:
        """Copy the host tier's run of ``block_hashes`` back into fresh, registered HBM blocks
        (left cached-free, so the caller shares them like HBM hits); ``pinned`` hits stay put."""
        want = tier.match(block_hashes)
        if not want:
            return []
        self.share(pinned)  # the HBM hits must not be evicted to make room
        n = min(want, self.num_free_blocks)
        blocks = self.take(n) or []
        restored: list[int] = []
        for block, h in zip(blocks, block_hashes, strict=False):
            if h in self._hash_to_block:  # already back in HBM (a later block of the chain): stop
                break
            self.register(block, h)
            restored.append(block)
        self.give(blocks)
        self.give(pinned)
        tier.loaded(len(restored))
        return restored

    def share(self, blocks: Sequence[int]) -> None:
        """Add one reference to each cached block (a prefix-cache hit)."""
        refs = self._refs
        for block in blocks:
            if refs[block] == 0:
                del self._cached_free[block]
                self.num_free_blocks -= 1
            refs[block] += 1

    def register(self, block: int, block_hash: int) -> None:
        """Make a full, computed block findable by its content hash."""
        if not self.enable_prefix_caching or block_hash in self._hash_to_block:
            return  # an identical block is already registered: keep that one
        if block in self._block_to_hash:
            return
        self._hash_to_block[block_hash] = block
        self._block_to_hash[block] = block_hash
        self._refs[block] = 1  # taken and unshared until now: one reference

    def check_invariants(self) -> None:
        """Raise AssertionError when the pool and the ref counts disagree (for tests)."""
        fresh = range(self._fresh, self.num_blocks)
        free = set(self._free) | set(self._cached_free) | set(fresh)
        assert len(free) == len(self._free) + len(self._cached_free) + len(fresh), (
            "block free twice"
        )
        assert self._refs.keys() == self._block_to_hash.keys(), "counted blocks != registered"
        assert self.num_free_blocks == len(free), "free-block counter out of step with the pool"
        for block, ref in enumerate(self.ref_counts):
            assert ref >= 0, f"block {block} has ref count {ref}"
            assert (ref == 0) == (block in free), f"block {block}: ref {ref} vs free pool"
        for block in self._cached_free:
            assert block in self._block_to_hash, f"cached free block {block} has no hash"
