"""Parallel layout of one model replica: tensor, pipeline, expert and attention-data parallel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infercast.errors import ConfigError

if TYPE_CHECKING:
    from infercast.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class Parallelism:
    """GPUs per replica = tp * pp.

    - ``tp``: tensor parallel; matmuls are split across ``tp`` GPUs, two
      all-reduces per layer (after attention and after the MLP).
    - ``pp``: pipeline stages; layers split evenly, activations sent stage to stage.
    - ``ep``: expert parallel inside the tp group for MoE layers (experts placed
      whole, tokens exchanged all-to-all); ``ep == 1`` slices each expert by tp.
    - ``dp``: independent replicas (data parallel) behind a router.
    - ``attn_dp``: attention data parallel inside the replica (DeepSeek / SGLang
      ``--enable-dp-attention``): each of the ``tp`` GPUs holds the whole
      attention (weights replicated) and runs it on its own 1/tp of the
      sequences, keeping only their KV; MLP/MoE layers stay split over tp / ep.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    attn_dp: bool = False

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "dp"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"`{name}` must be a positive integer, got {value!r}")
        if self.ep > self.tp * self.pp and self.ep > 1:
            raise ConfigError(
                f"`ep` {self.ep} exceeds the GPUs of a replica (tp*pp = {self.tp * self.pp})"
            )

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp


def attention_split_problem(model: ModelSpec, tp: int) -> str | None:
    """Why ``tp`` ranks cannot shard the model's attention by whole heads, else None.

    Serving engines shard attention by whole heads and refuse anything else (vLLM's
    ``ModelConfig.verify_with_parallel_config``: the heads must be divisible by the TP
    size; its ``QKVParallelLinear``: KV heads divisible by TP, or TP a multiple of them,
    each rank then holding a replica). MLA's latent KV is replicated, so only its heads count."""
    a = model.attention
    if tp > 1 and a.num_heads % tp:
        return f"tp {tp} does not divide {model.name}'s {a.num_heads} attention heads"
    if tp > 1 and a.kind != "mla" and a.num_kv_heads % tp and tp % a.num_kv_heads:
        return (
            f"tp {tp} neither divides nor is a multiple of {model.name}'s {a.num_kv_heads} KV heads"
        )
    return None


def check_attention_split(model: ModelSpec, par: Parallelism) -> None:
    """Raise :class:`ConfigError` for a tensor-parallel size that splits attention heads unevenly
    (:func:`attention_split_problem`). Attention data parallel runs whole attention per rank,
    so no split is checked there."""
    atp = 1 if (par.attn_dp and par.tp > 1) else par.tp
    problem = attention_split_problem(model, atp)
    if problem is None:
        return
    ok = [
        t
        for t in range(1, model.attention.num_heads + 1)
        if attention_split_problem(model, t) is None
    ]
    sizes = ", ".join(map(str, ok))
    raise ConfigError(
        f"`tp`{problem.removeprefix('tp')} (engines shard whole heads): "
        f"use `tp` {sizes}, or attention data parallel"
    )
