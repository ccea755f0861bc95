"""Collective-communication times over the scale-up link.

Ring all-reduce (Patarasuk & Yuan 2009; the NCCL ring algorithm): each GPU sends
and receives 2 (n - 1) / n of the buffer, so time = 2 (n - 1) / n * bytes / link_bw
plus a latency per collective. All-to-all (MoE expert parallel): each GPU sends
(n - 1) / n of its buffer. Point-to-point (pipeline stages): bytes / link_bw.
``link_bw`` is the per-GPU unidirectional scale-up bandwidth.
"""

from __future__ import annotations


def ring_allreduce_link_bytes(buffer_bytes: float, num_gpus: int) -> float:
    """Bytes each GPU sends over its link in a ring all-reduce of ``buffer_bytes``."""
    if num_gpus <= 1:
        return 0.0
    return 2.0 * (num_gpus - 1) / num_gpus * buffer_bytes


def alltoall_link_bytes(buffer_bytes: float, num_gpus: int) -> float:
    """Bytes each GPU sends in an all-to-all of its ``buffer_bytes``."""
    if num_gpus <= 1:
        return 0.0
    return (num_gpus - 1) / num_gpus * buffer_bytes


def transfer_time_s(
    link_bytes: float, link_bw: float, latency_s: float, collectives: float = 1.0
) -> float:
    """Time to move ``link_bytes`` per GPU at ``link_bw`` plus one latency per collective."""
    if link_bytes <= 0:
        return 0.0
    if link_bw <= 0:
        return float("inf")
    return link_bytes / link_bw + latency_s * collectives


def kv_transfer_time_s(
    num_bytes: float,
    bandwidth: float,
    latency_s: float,
    prefill_s: float = 0.0,
    num_layers: int = 1,
    overlap: bool = False,
) -> float:
    """A prompt's KV cache sent from a prefill to a decode worker (disaggregated serving):
    latency + bytes / bandwidth; with ``overlap`` (each layer's KV sent as soon as the prefill
    wrote it) only the part of the wire time not hidden under the prefill's other layers."""
    wire = transfer_time_s(num_bytes, bandwidth, 0.0)
    if overlap and num_layers > 1:
        wire = max(wire - prefill_s * (num_layers - 1) / num_layers, wire / num_layers)
    return latency_s + wire


def ring_allreduce_time_s(
    buffer_bytes: float, num_gpus: int, link_bw: float, latency_s: float = 0.0
) -> float:
    """Ring all-reduce time: 2 (n - 1) / n * bytes / link_bw + latency."""
    return transfer_time_s(ring_allreduce_link_bytes(buffer_bytes, num_gpus), link_bw, latency_s)
