"""Tables of the shipped catalogs: hardware parts, model presets and serving-engine presets
(``infercast hardware``, ``models``, ``engines``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from infercast.specs.engines import EnginePreset
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.units import GB, GiB


def hardware_table(parts: Sequence[HardwareSpec]) -> Table:
    """Memory, bandwidth, dense peaks, link and price of each part."""
    t = Table(title="Hardware presets (dense peaks, no sparsity; GB = 1e9 bytes)")
    for col in (
        "key",
        "name",
        "memory GB (GiB)",
        "TB/s",
        "bf16 TFLOP/s",
        "fp8 TFLOP/s",
        "fp4 TFLOP/s",
        "link GB/s",
        "$/h",
    ):
        t.add_column(col, justify="left" if col in ("key", "name") else "right")

    def tf(h, d):
        v = h.peak_flops(d)
        return f"{v / 1e12:,.0f}" if v else "-"

    for h in parts:
        mem = f"{h.memory_bytes / GB:,.0f} ({h.memory_bytes / GiB:,.0f})" if h.memory_bytes else "-"
        t.add_row(
            h.key,
            h.name,
            mem,
            f"{h.memory_bandwidth_bytes_per_s / 1e12:,.2f}"
            if h.memory_bandwidth_bytes_per_s
            else "-",
            tf(h, "bf16"),
            tf(h, "fp8"),
            tf(h, "fp4"),
            f"{h.link_bandwidth_bytes_per_s / 1e9:,.0f}" if h.link_bandwidth_bytes_per_s else "-",
            f"{h.price_per_hour:,.2f}" if h.price_per_hour else "-",
        )
    return t


def _attention_kind(m: ModelSpec) -> str:
    a = m.attention
    if a.kind == "mla":
        kind = "MLA"
    elif a.num_kv_heads == a.num_heads:
        kind = "MHA"
    else:
        kind = "MQA" if a.num_kv_heads == 1 else f"GQA {a.num_heads}/{a.num_kv_heads}"
    if m.min_window != float("inf"):
        kind += f", window {int(m.min_window)}"
    return kind


def models_table(specs: Sequence[ModelSpec]) -> Table:
    """Architecture, parameters, layers, attention kind and bf16 KV bytes per token."""
    t = Table(title="Model presets (any HF config.json path works too)")
    for col in (
        "name",
        "arch",
        "params (B)",
        "active (B)",
        "layers",
        "attention",
        "KV bytes/token (bf16)",
    ):
        t.add_column(col, justify="left" if col in ("name", "arch", "attention") else "right")
    for m in specs:
        t.add_row(
            m.name,
            m.arch,
            f"{m.total_params / 1e9:,.2f}",
            f"{m.active_params / 1e9:,.2f}",
            str(m.num_layers),
            _attention_kind(m),
            f"{m.kv_bytes_per_token(2.0):,.0f}",
        )
    return t


def engines_table(presets: Sequence[EnginePreset]) -> Table:
    """Policy, limits, chunk, KV block, memory rule, admission rule, preemption and profile group
    of each preset."""
    t = Table(title="Engine presets (base values; per-GPU and per-TP refinements: --show NAME)")
    left = ("name", "policy", "memory", "admission", "preempt", "profile group")
    for col in (
        "name",
        "policy",
        "seqs",
        "tokens/step",
        "chunk",
        "block",
        "memory",
        "admission",
        "preempt",
        "profile group",
    ):
        t.add_column(col, justify="left" if col in left else "right")
    for p in presets:
        t.add_row(
            p.name,
            p.policy,
            f"{p.max_num_seqs:,}",
            f"{p.max_num_batched_tokens:,}",
            f"{p.chunk_size:,}" if p.chunk_size else "whole",
            str(p.block_size),
            f"{p.memory_fraction:g} of {p.memory_rule}",
            p.admission,
            p.preemption,
            p.profile_group,
        )
    return t
