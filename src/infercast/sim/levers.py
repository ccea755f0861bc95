"""The production levers of a run config (``[kv_offload]``, ``[expert_routing]``, ``[lora]``)
turned into cost-model objects, and their totals after a run.

- ``lever_kwargs``: the StepModel class and keyword arguments for skewed routing and LoRA.
- ``apply_kv_offload``: gives the step model the host tier's size in blocks and the reload
  timer (``kv_host_blocks``, ``kv_reload``), which the scheduler config and the replica read.
- ``tier_extra``: the host tier's counts and bytes for the run summary.
"""

from __future__ import annotations


def lever_kwargs(cfg, model, hardware) -> tuple[type, dict]:
    """(StepModel or LoraStepModel, the extra keyword arguments) for ``cfg``'s levers."""
    from infercast.cost.step import StepModel

    extra: dict = {}
    r = cfg.expert_routing
    if r is not None:
        from infercast.cost.expert_routing import ExpertRouting
        from infercast.errors import ConfigError

        if model.moe is None:
            raise ConfigError(
                f"expert routing applies to MoE models; {cfg.model} is dense: "
                "drop --expert-skew/--expert-loads"
            )
        e = model.moe.num_experts
        extra["routing"] = (
            ExpertRouting.zipf(e, r.skew, r.redundant)
            if r.skew is not None
            else ExpertRouting.from_file(r.loads, e, r.redundant)
        )
    if cfg.lora is None:
        return StepModel, extra
    from infercast.cost.kv_tier import host_link
    from infercast.cost.lora import LoraSpec, LoraStepModel, parse_targets

    lo = cfg.lora
    spec = LoraSpec(lo.rank, parse_targets(lo.targets), lo.adapters, lo.slots)
    bw = 0.0
    if spec.hit_ratio(cfg.scheduler.max_num_seqs) < 1.0:
        bw = (
            cfg.kv_offload.host_link_gbps * 1e9
            if cfg.kv_offload and cfg.kv_offload.host_link_gbps
            else host_link(hardware)[0]
        )
    return LoraStepModel, {**extra, "lora": spec, "host_bandwidth_bytes_per_s": bw}


def apply_kv_offload(cfg, sm) -> None:
    """Attach ``cfg.kv_offload``'s host tier (size in blocks, reload timer) to step model ``sm``."""
    o = cfg.kv_offload
    if o is None:
        return
    from infercast.cost.kv_tier import KvReload, host_blocks, host_link

    bs = cfg.scheduler.block_size
    if o.host_link_gbps:
        bw, source = o.host_link_gbps * 1e9, "--host-link-gbps"
    else:
        bw, source = host_link(sm.hardware)
    sm.kv_host_blocks = host_blocks(o.gib, sm.kv_bytes_per_token, sm.parallel.gpus_per_replica, bs)
    sm.kv_reload = KvReload(sm.kv_bytes_per_token * bs, bw, o.overlap, source)


def tier_extra(replicas, timer):
    """A callable giving the host tier's totals over ``replicas`` once the run is over."""

    def totals() -> dict:
        tiers = [r.sched.kv.host_tier for r in replicas]
        loaded = sum(t.num_loaded for t in tiers)
        reload = timer.kv_reload
        return {
            "kv_offload_blocks_per_replica": timer.kv_host_blocks,
            "kv_offload_blocks_stored": sum(t.num_stored for t in tiers),
            "kv_offload_blocks_loaded": loaded,
            "kv_offload_blocks_dropped": sum(t.num_dropped for t in tiers),
            "kv_offload_reload_s": reload.transfer_s(loaded),
            "kv_offload_link_bytes_per_s": reload.bandwidth_bytes_per_s,
            "kv_offload_link_source": reload.source,
        }

    return totals


def lever_facts(step_model) -> dict:
    """What the step model's levers cost, for the run summary (empty without levers)."""
    out: dict = {}
    routing = getattr(step_model, "routing", None)
    if routing is not None:
        moe, ep = step_model.model.moe, step_model.parallel.ep
        out.update(
            expert_routing=routing.label,
            expert_redundant_slots=routing.redundant,
            expert_busiest_rank_over_mean=routing.imbalance(moe.experts_per_token, ep),
        )
    lora = getattr(step_model, "lora", None)
    if lora is not None:
        out.update(
            lora_adapter_bytes_per_gpu=step_model.adapter_bytes,
            lora_hit_ratio=step_model.hit_ratio,
            lora_load_s=step_model.load_s,
        )
    return out


def lever_lines(d: dict) -> list[str]:
    """One plain line per lever in a run's JSON dict ``d`` (for the console table)."""
    lines = []
    if "expert_routing" in d:
        lines.append(
            f"expert routing {d['expert_routing']}, {d['expert_redundant_slots']} redundant slots: "
            f"busiest EP rank carries {d['expert_busiest_rank_over_mean']:.2f}x the mean rows"
        )
    if "lora_adapter_bytes_per_gpu" in d:
        lines.append(
            f"LoRA: {d['lora_adapter_bytes_per_gpu'] / 1e6:,.1f} MB per adapter per GPU; "
            f"{100 * d['lora_hit_ratio']:.0f}% of requests find theirs resident, a miss loads in "
            f"{1e3 * d['lora_load_s']:,.2f} ms"
        )
    if "kv_offload_blocks_loaded" in d:
        lines.append(
            f"KV offload: {d['kv_offload_blocks_per_replica']:,} host blocks per replica; "
            f"{d['kv_offload_blocks_stored']:,} stored, {d['kv_offload_blocks_loaded']:,} reloaded "
            f"({d['kv_offload_reload_s']:,.2f} s of transfer at "
            f"{d['kv_offload_link_bytes_per_s'] / 1e9:,.1f} GB/s, "
            f"{d['kv_offload_link_source'].split(' (')[0]})"
        )
    return lines
