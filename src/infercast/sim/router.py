"""Routers: which replica gets an arriving request. One small object per policy.

- ``round-robin``: replicas in turn.
- ``least-tokens``: fewest outstanding tokens (prompt + max output of requests
  routed there and not finished), ties to the lowest index.
- ``prefix-affinity``: requests of one shared-prefix group go where the group
  went first (so its prefix stays cached in one place); the first request of a
  group, or one without a prefix, goes to the replica with fewest outstanding tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from infercast.errors import ConfigError


class _Loaded(Protocol):
    outstanding_tokens: int


class RoundRobinRouter:
    name = "round-robin"

    def __init__(self) -> None:
        self._next = 0

    def route(self, group: int, replicas: Sequence[_Loaded]) -> int:
        i = self._next % len(replicas)
        self._next += 1
        return i


class LeastTokensRouter:
    name = "least-tokens"

    def route(self, group: int, replicas: Sequence[_Loaded]) -> int:
        return min(range(len(replicas)), key=lambda i: replicas[i].outstanding_tokens)


class PrefixAffinityRouter:
    name = "prefix-affinity"

    def __init__(self) -> None:
        self._home: dict[int, int] = {}
        self._least = LeastTokensRouter()

    def route(self, group: int, replicas: Sequence[_Loaded]) -> int:
        if group < 0:
            return self._least.route(group, replicas)
        home = self._home.get(group)
        if home is None:
            home = self._home[group] = self._least.route(group, replicas)
        return home


def make_router(name: str) -> RoundRobinRouter | LeastTokensRouter | PrefixAffinityRouter:
    """The router for a name (``-`` or ``_`` accepted)."""
    table = {c.name: c for c in (RoundRobinRouter, LeastTokensRouter, PrefixAffinityRouter)}
    key = name.replace("_", "-")
    if key not in table:
        raise ConfigError(f"router {name!r}: choose one of {', '.join(table)}")
    return table[key]()
