"""Parallel layout of one model replica: tensor, pipeline, expert and attention-data parallel."""

from __future__ import annotations

from dataclasses import dataclass

from infercast.errors import ConfigError


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
                raise ConfigError(f"--{name} must be a positive integer, got {value!r}")
        if self.ep > self.tp * self.pp and self.ep > 1:
            raise ConfigError(f"--ep {self.ep} exceeds the GPUs of a replica (tp*pp = {self.tp * self.pp})")

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp
