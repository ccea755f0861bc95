"""Claim 19: mixing LoRA adapters in a batch costs throughput: each distinct adapter's weights are
read every step.

A multi-adapter server (Punica's SGMV, S-LoRA, vLLM's LoRA kernels) batches requests for
different adapters over one base model; the base GEMMs keep their batching, but the LoRA
kernels read every *distinct* adapter in the batch each step and run each on fewer rows
(``cost/lora.py``). Resident adapters also take memory from the KV cache, and an adapter that is
not resident is loaded over the host link before its request's first step (``--lora-slots``).
Llama-3.1-8B BF16 on one H100, 64 requests in flight (1,000 in / 250 out), rank-16 adapters on
q, k, v, o, from 1 adapter to 1,000 equally popular ones; then rank 64 on every linear layer.
Punica reports 2 ms of added latency per token for its batched multi-adapter kernels and S-LoRA
up to 4x the throughput of serving adapters one at a time (their abstracts, arXiv:2310.18547
and 2311.03285).
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, main, serving_row, variants

SIM = (
    "infercast simulate --profile builtin --model llama-3.1-8b --hardware h100-sxm --weights bf16 "
    "--max-concurrency 64 --num-prompts 1000 --input-tokens 1000 --output-tokens 250 --seed 1 "
    "--no-progress --json"
)
SETUPS = {
    "no LoRA": "",
    "1 adapter": "--lora-rank 16 --lora-adapters 1",
    "8 adapters": "--lora-rank 16 --lora-adapters 8",
    "64 adapters": "--lora-rank 16 --lora-adapters 64",
    "1000 adapters, 64 slots": "--lora-rank 16 --lora-adapters 1000 --lora-slots 64",
    "64 adapters, rank 64 all layers": "--lora-rank 64 --lora-targets all --lora-adapters 64",
}
CLAIM = {
    "id": 19,
    "claim": "mixing many LoRA adapters in one batch costs throughput: every distinct adapter is "
    "read each step",
    "where": "issue 20 (production levers): many adapters",
    "commands": [SIM + "   with " + " | ".join(v or "(nothing)" for v in SETUPS.values())],
}


def run() -> dict:
    return {
        name: {
            **serving_row(d),
            "adapter_mb_per_gpu": d.get("lora_adapter_bytes_per_gpu", 0.0) / 1e6,
            "resident_hit_ratio": d.get("lora_hit_ratio", 1.0),
        }
        for name, d in variants(SIM, SETUPS).items()
    }


def verdict(r: dict) -> tuple[str, str]:
    base = r["no LoRA"]
    rows = "; ".join(
        f"{k}: {v['output_tokens_per_s'] / base['output_tokens_per_s']:.1%} of the base "
        f"throughput, TPOT p50 {v['tpot_p50_s'] * 1e3:.2f} ms"
        for k, v in r.items()
        if k != "no LoRA"
    )
    one, many = r["1 adapter"]["output_tokens_per_s"], r["64 adapters"]["output_tokens_per_s"]
    added = (r["64 adapters"]["tpot_p50_s"] - base["tpot_p50_s"]) * 1e3
    finding = (
        f"Llama-3.1-8B BF16, H100, 64 in flight; base {base['output_tokens_per_s']:,.0f} output "
        f"tok/s, TPOT p50 {base['tpot_p50_s'] * 1e3:.2f} ms. {rows}. A rank-16 q,k,v,o adapter is "
        f"{r['1 adapter']['adapter_mb_per_gpu']:.1f} MB."
    )
    if many < one:
        big = r["64 adapters, rank 64 all layers"]
        return CONDITIONAL, (
            finding + f" Mixing 64 adapters costs {1 - many / one:.1%} more than one shared "
            f"adapter and adds {added:.2f} ms per token (Punica: ~2 ms): small at rank 16, "
            "but rank 64 on every linear layer makes each adapter "
            f"{big['adapter_mb_per_gpu']:,.0f} MB, the batch reads up to 64 of them per step and "
            f"keeps {big['output_tokens_per_s'] / base['output_tokens_per_s']:.0%} of the "
            "throughput. The penalty is bytes: it grows with rank x targets x distinct adapters in "
            "the batch."
        )
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
