"""Dollars per token: what a fleet's hourly price buys at a throughput.

$/M tokens = price per GPU-hour x GPUs / 3600 s/h / (tokens/s) x 1e6. One formula
for every face that prices throughput (estimate, plan, the ui's simulate view).
"""

from __future__ import annotations


def dollars_per_million_tokens(price_per_gpu_hour: float, num_gpus: int, tokens_per_s: float) -> float:
    """$ per million tokens at ``tokens_per_s`` on ``num_gpus`` GPUs (inf when nothing is produced)."""
    if tokens_per_s <= 0:
        return float("inf")
    return price_per_gpu_hour * num_gpus / 3600.0 / tokens_per_s * 1e6
