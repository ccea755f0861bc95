"""A host-memory KV tier below HBM: its host link, what a reload costs, and when it pays.

LMCache and vLLM's CPU KV offloading keep KV blocks that HBM evicts in host DRAM and copy
them back on a later prefix hit instead of recomputing them (``sched/host_tier.py`` keeps the
blocks' books). This module times the copy:

- **Bandwidth**: each GPU reloads its own KV shard over its own host link, so a reload of
  ``n`` tokens takes ``n * kv_bytes_per_token(per GPU) / link``. The link's *measured*
  host-to-device bandwidth comes from ``data/host_links.csv`` (PCIe Gen5 x16: 55.63 GB/s of
  63 GB/s, NVIDIA nvbandwidth's copy-engine test; Gen4 and NVLink-C2C parts: their spec
  scaled by that measured fraction, said in the note). ``--host-link-gbps`` overrides it.
- **Overlap**: ``overlap=False`` blocks the step that needs the blocks until they arrive
  (LMCache's default ``retrieve`` before the forward pass); ``overlap=True`` streams them
  layer by layer under the step's own compute (LMCache's layer-wise mode), so the step takes
  ``max(compute, transfer)``.
- **Stores** (HBM -> host, on eviction) go the other way over a full-duplex link, asynchronously
  in both engines: they are not charged.
- **When it pays** (:func:`reload_vs_recompute`): a reload costs ``kv_bytes/token / link`` per
  token; recomputing costs a prefill token's time. Offload wins when the first is smaller and
  the prefix would otherwise have been evicted.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

from infercast.errors import ConfigError

GIB = 2**30


@cache
def _links() -> dict[str, dict[str, str]]:
    text = resources.files("infercast.data").joinpath("host_links.csv").read_text(encoding="utf-8")
    return {row["link"]: row for row in csv.DictReader(text.splitlines())}


def _measured_fraction() -> float:
    gen5 = _links()["pcie-gen5-x16"]
    return float(gen5["measured_bytes_per_s"]) / float(gen5["unidir_bytes_per_s"])


def host_link(hw) -> tuple[float, str]:
    """(host-to-device bytes/s per GPU, where the figure comes from) for hardware ``hw``."""
    links = _links()
    c2c = links["nvlink-c2c"]
    keys = {hw.key, getattr(hw, "variant_of", "") or ""}
    if keys & set(c2c["parts"].split(";")):
        name = "nvlink-c2c"
    elif hw.pcie_bandwidth_bytes_per_s >= 6e10:
        name = "pcie-gen5-x16"
    elif hw.pcie_bandwidth_bytes_per_s >= 3e10:
        name = "pcie-gen4-x16"
    else:
        raise ConfigError(
            f"hardware {hw.key!r} has no host link in its spec: give --host-link-gbps "
            "(host-to-device GB/s per GPU)"
        )
    row = links[name]
    if row["measured_bytes_per_s"]:
        return float(
            row["measured_bytes_per_s"]
        ), f"{name} measured ({row['citation'].split(';')[0]})"
    bw = float(row["unidir_bytes_per_s"]) * _measured_fraction()
    return (
        bw,
        f"{name} spec x {_measured_fraction():.3f} (the measured Gen5 fraction; no measurement "
        "shipped)",
    )


@dataclass(frozen=True)
class KvReload:
    """The time a step pays for KV blocks copied back from host memory before it runs."""

    bytes_per_block: float  # per GPU
    bandwidth_bytes_per_s: float  # host-to-device, per GPU
    overlap: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if not self.bandwidth_bytes_per_s > 0:
            raise ConfigError(f"host link bandwidth {self.bandwidth_bytes_per_s!r} B/s must be > 0")

    def transfer_s(self, blocks: int) -> float:
        """Seconds to copy ``blocks`` KV blocks host -> GPU."""
        return blocks * self.bytes_per_block / self.bandwidth_bytes_per_s

    def step_time_s(self, compute_s: float, blocks: int) -> float:
        """The step's time with ``blocks`` reloaded for it: serial, or overlapped layer by layer."""
        if not blocks:
            return compute_s
        load = self.transfer_s(blocks)
        return max(compute_s, load) if self.overlap else compute_s + load


def host_blocks(
    offload_gib: float, kv_bytes_per_token_per_gpu: float, gpus: int, block_size: int
) -> int:
    """Blocks a replica's ``offload_gib`` GiB of host DRAM holds (every GPU's shard of each
    block)."""
    if not offload_gib > 0:
        raise ConfigError(f"KV offload {offload_gib!r} GiB must be > 0")
    per_block = kv_bytes_per_token_per_gpu * gpus * block_size
    return max(1, int(offload_gib * GIB // per_block))


def reload_vs_recompute(step_model, link_bytes_per_s: float, chunk: int = 2048) -> dict[str, float]:
    """Per prompt token: reloading its KV over the host link vs recomputing it in a prefill chunk
    of ``chunk`` tokens (the cost model's expected time), and their ratio (> 1: offload pays)."""
    reload_s = step_model.kv_bytes_per_token / link_bytes_per_s
    recompute_s = step_model.prefill_cost(chunk).time_s / chunk
    return {
        "reload_s_per_token": reload_s,
        "recompute_s_per_token": recompute_s,
        "recompute_over_reload": recompute_s / reload_s,
    }
