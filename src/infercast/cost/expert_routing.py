"""Skewed MoE routing, the expert-parallel rank it overloads, and EPLB's redundant experts.

Uniform routing (``cost/ops.py``'s default) spreads a step's ``t * k`` token-expert rows
evenly over the experts and the ``ep`` ranks holding them. Real routers do not: a few
experts take a large share of the tokens. This module states that skew and derives what
the step pays for it:

- **Skew.** Either a power law over the experts ranked by popularity, the i-th hottest
  taking a share proportional to ``i ** -s`` (Zipf exponent ``s``; aiconfigurator's MoE
  collectors state routing skew the same way, a power-law ``alpha``: ai-dynamo/aiconfigurator
  ``collector/*/collect_moe.py``, ``power_law_logits_v3``), or a per-expert load histogram
  (token counts per expert id, e.g. from a published routing trace).
- **Per-token selection.** A token picks ``k`` distinct experts, so expert ``i`` is chosen with
  probability ``p_i = k * w_i`` capped at 1 (the excess of a capped expert goes to the others
  in proportion, so ``sum p_i = k`` still holds).
- **Distinct experts touched** by ``t`` tokens: ``sum_i 1 - (1 - p_i) ** t`` (the uniform
  formula ``E * (1 - (1 - k/E) ** t)`` is the case ``p_i = k / E``). Skew touches fewer
  experts, so a small decode batch reads fewer expert weights.
- **The busiest rank.** Under expert parallelism each rank runs the rows routed to its own
  experts, and the step waits for the rank with the most rows (DeepSeek-V3 technical report,
  arXiv:2412.19437, section 3.4: "load balancing among GPUs" is why it adds redundant experts).
  Its rows are ``t * sum_{i on rank} p_i`` and its distinct experts the touched sum over them.
  Placement: a histogram keeps its expert ids and the engines' contiguous map (expert ``i`` on
  rank ``i // (E / ep)``, vLLM's and SGLang's default expert map); a power law has no ids and is
  dealt round-robin by popularity rank (the kindest static map: what is left is the hot
  experts' own weight).
- **EPLB** (github.com/deepseek-ai/EPLB, ``replicate_experts`` then ``balanced_packing``):
  ``redundant`` extra expert slots go one at a time to the expert with the highest load per
  replica; a replicated expert's tokens split evenly over its replicas; replicas are then
  packed heaviest first onto the least-loaded rank that still has a free slot, each rank
  holding ``(E + redundant) / ep`` slots. Each redundant slot costs one expert's weights on
  the rank holding it, in every MoE layer.

These are expected loads, not the random fluctuation of one batch around them (which adds
imbalance at small batches even under uniform routing); the rank with the most rows and the
rank with the most distinct experts are both taken as the binding one (the same rank unless
the histogram says otherwise).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from infercast.errors import ConfigError


@dataclass(frozen=True)
class ExpertRouting:
    """Routing skew over ``len(shares)`` experts and the EPLB replicas that offset it.

    ``shares``: each expert's fraction of the routed token-expert pairs (sums to 1), by expert
    id; ``ids_meaningful``: False for a power law (placed round-robin by popularity);
    ``redundant``: EPLB's extra expert slots over the EP group (0 = none).
    """

    shares: tuple[float, ...]
    ids_meaningful: bool = True
    redundant: int = 0
    label: str = ""
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if len(self.shares) < 1 or any(not (s >= 0 and math.isfinite(s)) for s in self.shares):
            raise ConfigError("expert loads must be finite and >= 0, one per expert")
        total = sum(self.shares)
        if not total > 0:
            raise ConfigError("expert loads sum to 0: give at least one expert a load")
        object.__setattr__(self, "shares", tuple(s / total for s in self.shares))
        if self.redundant < 0:
            raise ConfigError(f"redundant experts {self.redundant}: must be >= 0")

    # ---- construction ------------------------------------------------------------
    @classmethod
    def zipf(cls, num_experts: int, exponent: float, redundant: int = 0) -> ExpertRouting:
        """The i-th hottest of ``num_experts`` experts takes a share proportional to
        ``i ** -exponent``."""
        if not (exponent >= 0 and math.isfinite(exponent)):
            raise ConfigError(
                f"expert skew {exponent!r}: a Zipf exponent must be a finite number >= 0 "
                "(0 = uniform, 1 = the hottest expert twice the second's load)"
            )
        raw = tuple((i + 1) ** -exponent for i in range(num_experts))
        return cls(raw, False, redundant, f"Zipf s={exponent:g}")

    @classmethod
    def from_file(cls, path: str, num_experts: int, redundant: int = 0) -> ExpertRouting:
        """Per-expert loads from a CSV with an ``expert`` and a ``load`` (or ``tokens``) column."""
        p = Path(path)
        if not p.is_file():
            raise ConfigError(
                f"expert load file {path!r} does not exist: give a CSV with columns expert,load"
            )
        with p.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        col = next((c for c in ("load", "tokens") if rows and c in rows[0]), None)
        if not rows or col is None or "expert" not in rows[0]:
            raise ConfigError(
                f"expert load file {path!r}: needs columns expert,load (one row per expert)"
            )
        loads = [0.0] * num_experts
        for row in rows:
            try:
                i, v = int(row["expert"]), float(row[col])
            except ValueError:
                raise ConfigError(
                    f"expert load file {path!r}: row {row} is not an integer expert id and a number"
                ) from None
            if not 0 <= i < num_experts:
                raise ConfigError(
                    f"expert load file {path!r}: expert {i} outside 0..{num_experts - 1} "
                    "(the model's routed experts)"
                )
            loads[i] += v
        return cls(tuple(loads), True, redundant, f"loads from {p.name}")

    # ---- derived -----------------------------------------------------------------
    def selection_probs(self, k: int) -> tuple[float, ...]:
        """``p_i``: the chance one token routes to expert ``i`` (top-``k``, distinct experts)."""
        e = len(self.shares)
        if k > e:
            raise ConfigError(f"{k} experts per token but only {e} experts")
        p = [k * s for s in self.shares]
        capped: set[int] = set()
        while True:  # water-filling: an expert cannot be picked twice by one token
            over = [i for i, x in enumerate(p) if x > 1.0 and i not in capped]
            if not over:
                return tuple(p)
            capped.update(over)
            free = [i for i in range(e) if i not in capped]
            room = k - len(capped)
            mass = sum(self.shares[i] for i in free)
            for i in capped:
                p[i] = 1.0
            for i in free:
                p[i] = room * self.shares[i] / mass if mass > 0 else room / len(free)

    def placement(self, ep: int) -> tuple[tuple[tuple[int, float], ...], ...]:
        """Per EP rank, its (expert, fraction of that expert's tokens) replicas."""
        e = len(self.shares)
        if e % ep:
            raise ConfigError(f"{e} experts do not split over ep {ep}: use an ep that divides {e}")
        if self.redundant == 0:
            if self.ids_meaningful:  # contiguous expert map
                per = e // ep
                return tuple(
                    tuple((i, 1.0) for i in range(r * per, (r + 1) * per)) for r in range(ep)
                )
            order = sorted(range(e), key=lambda i: -self.shares[i])
            return tuple(tuple((i, 1.0) for i in order[r::ep]) for r in range(ep))
        return _eplb(self.shares, self.redundant, ep)

    def rank_load(self, t: float, k: int, ep: int) -> tuple[float, float]:
        """(distinct experts, token-expert rows) on the busiest of ``ep`` ranks for ``t`` tokens."""
        ranks = self._memo.get((k, ep))
        if ranks is None:  # per rank, each replica's chance of being picked by one token
            p = self.selection_probs(k)
            ranks = self._memo[(k, ep)] = tuple(
                tuple(p[i] * f for i, f in rep) for rep in self.placement(ep)
            )
        rows, touched = 0.0, 0.0
        for q in ranks:
            r = sum(q) * t
            d = sum(1.0 - (1.0 - x) ** t for x in q) if t > 0 else 0.0
            rows, touched = max(rows, r), max(touched, d)
        return touched, rows

    def extra_weight_bytes(self, expert_bytes_per_layer: float, moe_layers: int, ep: int) -> float:
        """Per-GPU bytes of the redundant replicas: ``redundant / ep`` experts per rank, every
        MoE layer."""
        return self.redundant / ep * expert_bytes_per_layer * moe_layers

    def imbalance(self, k: int, ep: int) -> float:
        """Rows on the busiest rank over the mean (1 = balanced), at any token count."""
        return self.rank_load(1.0, k, ep)[1] * ep / k


def _eplb(
    shares: tuple[float, ...], redundant: int, ep: int
) -> tuple[tuple[tuple[int, float], ...], ...]:
    """EPLB's replicate-then-pack on expected loads (see module docstring)."""
    e = len(shares)
    slots = e + redundant
    if slots % ep:
        raise ConfigError(
            f"{e} experts + {redundant} redundant = {slots} slots do not split over ep {ep}: "
            f"use a redundant count that makes the total a multiple of {ep}"
        )
    count = [1] * e
    for _ in range(redundant):  # the expert with the highest load per replica gets one more
        i = max(range(e), key=lambda j: (shares[j] / count[j], -j))
        count[i] += 1
    replicas = sorted(
        ((shares[i] / count[i], i) for i in range(e) for _ in range(count[i])),
        key=lambda x: (-x[0], x[1]),
    )
    per_rank = slots // ep
    load = [0.0] * ep
    held: list[list[tuple[int, float]]] = [[] for _ in range(ep)]
    for w, i in replicas:  # heaviest first onto the lightest rank with room
        r = min((r for r in range(ep) if len(held[r]) < per_rank), key=lambda r: (load[r], r))
        load[r] += w
        held[r].append((i, 1.0 / count[i]))
    return tuple(tuple(h) for h in held)


def replica_bytes(routing: ExpertRouting, model, shards, parallel) -> float:
    """Per-GPU weight bytes of ``routing``'s redundant experts: one routed expert (gate, up, down
    at the experts' own storage) split over the ``tp / ep`` ranks of an expert, on ``1 / pp`` of
    the MoE layers (``cost/memory.py`` splits weights over ``tp * pp`` alike)."""
    moe = model.moe
    mats = 3 if model.gated_mlp else 2
    per_expert = (
        mats * model.hidden_size * moe.expert_ffn_size * shards.we / (parallel.tp / parallel.ep)
    )
    return routing.extra_weight_bytes(per_expert, model.num_moe_layers, parallel.ep) / parallel.pp
