"""Disaggregated serving: a prefill pool and a decode pool joined by a KV transfer.

A request is routed to a prefill replica (the configured router), which runs
its prompt (chunked, with its own batch limits) as a request of one output
token. Its KV cache then crosses the link to a decode replica (least
outstanding tokens) in

    transfer_s = latency + bytes / bandwidth,   bytes = prompt tokens x full KV bytes per token

(the model's KV bytes per token at the KV dtype, all layers and heads, since
every TP shard sends its part; ``kv_transfer_bytes``). With ``layer_overlap``
layer i's KV leaves while layer i + 1 computes, so only what does not fit
under the prefill stays exposed: max(bytes/bw - prefill_s (L-1)/L, bytes/bw / L).
Bandwidth default: 50 GB/s per GPU (one 400 Gb/s RDMA NIC per GPU, as in DGX
H100 nodes) times the smaller pool's TP (each rank sends its shard).

The decode replica admits the request when its scheduler finds KV blocks for
prompt + output (so decode admission is limited by the decode pool's KV
capacity; a request waits in its queue meanwhile), then streams every output
token. The first one comes from the decode side's first step, as in vLLM's
disaggregated proxy, so TTFT = queueing + prefill + transfer + one decode step
(+ decode-side queueing). That first step is charged as a one-token decode
over the transferred context (the KV is already there); the decode pool never
runs a prefill, so prefill chunks never stall its streams.

Not modelled: KV reserved on the decode side before the transfer starts,
link contention between concurrent transfers, and recomputation after a
decode-side preemption (charged as a decode step, so it is optimistic).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from infercast.cost.comm import kv_transfer_time_s
from infercast.sched import Request, Scheduler, SchedulerConfig
from infercast.sim.build import pool_step_model
from infercast.sim.kernel import PRIO_ARRIVAL, Kernel
from infercast.sim.replica import Replica
from infercast.sim.sched_config import scheduler_config

DEFAULT_LINK_PER_GPU_BYTES_PER_S = 50e9  # 400 Gb/s NIC per GPU
DECODE_TOKEN_BUDGET = 1 << 30  # transferred prompts load whole: they cost no compute


def kv_transfer_bytes(step_model, prompt_tokens: int) -> float:
    """Bytes of a prompt's KV cache, all shards (per-GPU bytes / the share one GPU keeps)."""
    mem = step_model.memory
    return prompt_tokens * mem.kv_bytes_per_token / mem.kv_shard


class DecodeTimer:
    """A decode pool's step time: every scheduled sequence is a one-token decode.

    A transferred request's first step lists its whole context as new tokens
    (the scheduler does not know it arrived with KV); it is charged as one
    decode token over that context.
    """

    def __init__(self, target):
        self.target = target
        self.kv_capacity_tokens = target.kv_capacity_tokens
        self.affine_context_limit = target.affine_context_limit

    def step_time_s(self, new, cached) -> float:
        ctx = [c + n - 1 for n, c in zip(new, cached, strict=True)]
        return self.target.step_time_s([1] * len(ctx), ctx)

    def mixed_step_time_s(
        self, num_decode, decode_cached_sum, new_tokens=(), cached_tokens=()
    ) -> float:
        extra = sum(c + n - 1 for n, c in zip(new_tokens, cached_tokens, strict=True))
        return self.target.mixed_step_time_s(
            num_decode + len(new_tokens), decode_cached_sum + extra
        )

    def chunk_step_time_s(self, num_decode, decode_cached_sum, n, c) -> float:
        return self.target.mixed_step_time_s(num_decode + 1, decode_cached_sum + c + n - 1)

    def decode_affine(self, num_seqs: int) -> tuple[float, float]:
        return self.target.decode_affine(num_seqs)

    @property
    def affine_past_window_context(self) -> float:
        return getattr(self.target, "affine_past_window_context", float("inf"))

    def decode_affine_past_window(self, num_seqs: int) -> tuple[float, float]:
        return self.target.decode_affine_past_window(num_seqs)


class _Transfer:
    """Moves finished prefills to the decode pool after the transfer time.

    The prefill replicas' completion sink (:class:`~infercast.sim.collect.Completions`): a finished
    prefill becomes, after its transfer, a decode-side request that keeps its arrival and its
    first scheduling on the prefill side; no record is built on the way.
    """

    wants_times = False  # a prefill's one token time is not needed: decode streams them all
    posts_events = True  # the transfer's end

    def __init__(self, cfg, kernel: Kernel, driver, prefill_sm, decode_sm, decode: list[Replica]):
        d = cfg.disaggregation
        self.kernel, self.driver, self.decode = kernel, driver, decode
        self.sm, self.overlap, self.latency = prefill_sm, d.layer_overlap, d.transfer_latency_s
        tp = min(prefill_sm.parallel.tp, decode_sm.parallel.tp)
        self.bandwidth = d.transfer_bandwidth_bytes_per_s or DEFAULT_LINK_PER_GPU_BYTES_PER_S * tp
        self.outputs: dict[str, int] = {}  # request id -> output tokens it will need on decode
        self._times: dict[int, float] = {}  # prompt tokens -> transfer seconds (a pure function)
        self.num_transfers, self.transfer_s = 0, 0.0

    def add(self, req: Request, finish_s: float, times=None) -> None:
        """A prefill finished now: its KV leaves for the decode pool."""
        output = self.outputs.pop(req.request_id)
        p = req.prompt_tokens
        t = self._times.get(p)
        if t is None:  # a run's prompts take few distinct lengths: each costed once
            prefill_s = self.sm.step_time_s([p], [0]) if self.overlap else 0.0
            t = self._times[p] = kv_transfer_time_s(
                kv_transfer_bytes(self.sm, p),
                self.bandwidth,
                self.latency,
                prefill_s,
                self.sm.model.num_layers,
                self.overlap,
            )
        self.num_transfers += 1
        self.transfer_s += t
        moved = Request(
            req.request_id, p, output, req.arrival_s, first_scheduled_s=req.first_scheduled_s
        )
        self.kernel.at(self.kernel.now + t, PRIO_ARRIVAL, self._arrive, moved)

    def _arrive(self, req: Request) -> None:
        decode = self.decode
        (decode[0] if len(decode) == 1 else min(decode, key=_outstanding)).submit(req)

    def on_prefill_rejected(self, rec, index: int) -> None:
        self.outputs.pop(rec.request_id, None)
        self.driver.emit(rec, index)


def _outstanding(replica: Replica) -> int:
    return replica.outstanding_tokens


class PrefillReplica(Replica):
    """A prefill replica: every request runs to its first token only."""

    def __init__(self, *args, transfer: _Transfer, **kwargs):
        kwargs["complete"] = transfer
        super().__init__(*args, **kwargs)
        self.transfer = transfer

    def submit(self, req: Request) -> None:
        self.transfer.outputs[req.request_id] = req.max_output_tokens
        req.max_output_tokens = 1
        super().submit(req)

    def _start(self) -> None:
        """The step lifecycle's start; with nothing queued or running (a prefill replica idles
        after most steps: its requests finish with their first token) it goes idle at once,
        as the general start would after scheduling an empty batch, without scheduling it."""
        if self.recv_interval == 1 and not (self.sched.waiting or self.sched.running):
            self._busy = False
            return
        super()._start()


@dataclasses.dataclass(frozen=True)
class DisaggPools:
    """Both pools' cost models and scheduler limits: built once, shared by every set of
    replicas built from them (a fleet starts many)."""

    prefill_sm: Any  # StepModel
    decode_sm: Any
    prefill_sched: SchedulerConfig
    decode_sched: SchedulerConfig


def disagg_pools(cfg, timer) -> DisaggPools:
    """The pools of ``cfg.disaggregation`` around the run's cost model ``timer``."""
    d = cfg.disaggregation
    pf_sm = pool_step_model(cfg, d.prefill, timer)
    dec_sm = pool_step_model(cfg, d.decode, timer)
    # Compact decodes even under windowed attention: ``DecodeTimer`` times a step from its
    # sequence count and context sum only, so listing every member each step (what
    # ``_pool_sched`` asks of a windowed model) costs O(members) per step and changes no time.
    dec_cfg = dataclasses.replace(
        _pool_sched(cfg, d.decode, dec_sm),
        max_num_batched_tokens=DECODE_TOKEN_BUDGET,
        policy="chunked",
        compact_decodes=True,
    )
    return DisaggPools(pf_sm, dec_sm, _pool_sched(cfg, d.prefill, pf_sm), dec_cfg)


def build_disagg(cfg, timer, kernel: Kernel, driver, series, pools: DisaggPools | None = None):
    """Prefill replicas on the driver's list (the router's), decode replicas behind a transfer
    (the pools built here unless given)."""
    d = cfg.disaggregation
    p = pools if pools is not None else disagg_pools(cfg, timer)
    pf_sm, dec_sm, pf_cfg, dec_cfg = p.prefill_sm, p.decode_sm, p.prefill_sched, p.decode_sched
    fast = cfg.mode == "fast"
    decode: list[Replica] = []
    xfer = _Transfer(cfg, kernel, driver, pf_sm, dec_sm, decode)
    complete = driver if driver.closed else driver.completions  # a closed loop sends on each
    for i in range(d.decode.replicas):
        decode.append(
            Replica(
                i,
                Scheduler(dec_cfg),
                DecodeTimer(dec_sm),
                kernel,
                driver.emit,
                fast=fast,
                observe=series.observe,
                complete=complete,
                itl=driver.itl,
            )
        )
    driver.unrouted.extend(decode)
    for i in range(d.prefill.replicas):
        driver.replicas.append(
            PrefillReplica(
                i,
                Scheduler(pf_cfg),
                pf_sm,
                kernel,
                xfer.on_prefill_rejected,
                fast=fast,
                observe=series.observe,
                transfer=xfer,
            )
        )

    def extra() -> dict[str, object]:
        busy = sum(r.stats.busy_s for r in decode)
        return {
            "disaggregated": True,
            "num_gpus": d.prefill.replicas * pf_sm.parallel.gpus_per_replica
            + d.decode.replicas * dec_sm.parallel.gpus_per_replica,
            "kv_transfer_s_mean": xfer.transfer_s / xfer.num_transfers
            if xfer.num_transfers
            else None,
            "kv_transfer_bandwidth_bytes_per_s": xfer.bandwidth,
            "decode_num_kv_blocks": dec_cfg.num_blocks,
            "decode_num_preemptions": sum(r.sched.num_preemptions for r in decode),
            "decode_mean_batch_size": sum(r.stats.seq_time_s for r in decode) / busy
            if busy
            else None,
            "decode_peak_kv_usage": max(r.stats.peak_kv_usage for r in decode),
        }

    return pf_cfg, extra


def _pool_sched(cfg, pool, sm):
    """The scheduler limits of one pool: the top-level ones unless the pool sets its own."""
    kv_capacity_tokens = sm.kv_capacity_tokens
    compact = float(sm.affine_context_limit) == float("inf")  # windowed attention: list everyone
    s = scheduler_config(cfg, kv_capacity_tokens, compact)
    changes = {
        k: getattr(pool, k) for k in ("max_num_seqs", "max_num_batched_tokens") if getattr(pool, k)
    }
    if (
        cfg.scheduler.num_blocks is None
        or pool.hardware
        or pool.tp
        or pool.ep
        or pool.attn_dp is not None
    ):
        changes["num_blocks"] = max(1, kv_capacity_tokens // s.block_size)
    return dataclasses.replace(s, **changes)
