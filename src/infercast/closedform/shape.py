"""The batch shape a closed-form model asks a cost model to time."""

from __future__ import annotations

Shape = tuple[tuple[int, int, int], ...]  # runs of (count, new tokens, cached tokens)
