"""Claim 17: a host-DRAM KV tier can beat a bigger TP: the batch it buys vs the transfer it costs.

When the prompts share long prefixes (RAG documents, system prompts, chat histories) that do not
all fit in HBM, the prefix cache evicts what a later request wants and the server recomputes it.
Two ways out: a second GPU (TP 2 doubles the KV pool, and the compute) or host memory as a
second KV tier (LMCache, vLLM's CPU offloading): evicted blocks are kept in DRAM and copied back
over the host link instead of recomputed (``--kv-offload-gib``; ``sched/host_tier.py``,
``cost/kv_tier.py``). Per prompt token, recomputing costs a prefill token's time and reloading
its KV costs ``kv_bytes / host link``: part A compares the two for Llama-3.1-8B on four parts
and for Llama-3.1-70B FP8 (TP 4) and Qwen3-30B-A3B (an MoE with 3B active) on H100 (the link from
``data/host_links.csv``: PCIe Gen5 measured 55.6 GB/s; Gen4 and NVLink-C2C scaled by that measured
fraction). Part B simulates the choice: Llama-3.1-8B BF16 on H100s, 160 prefix groups of 4,096
tokens (655k tokens of prefixes, more than one H100's 486k-token KV pool), 64 requests in flight: TP
1, TP 1 + 128 GiB of host KV, TP 2.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

PARTS = ("h100-sxm", "gh200", "l40s", "a100-sxm-80gb")
# (label, estimate flags, part): Llama-3.1-8B on every part, then two other shapes on H100
CASES = tuple(
    (f"llama-3.1-8b on {hw}", "--model llama-3.1-8b --weights bf16", hw) for hw in PARTS
) + (
    ("llama-3.1-70b fp8 TP4 on h100-sxm", "--model llama-3.1-70b --weights fp8 --tp 4", "h100-sxm"),
    (
        "qwen3-30b-a3b (MoE, 3B active) on h100-sxm",
        "--model qwen3-30b-a3b --weights bf16",
        "h100-sxm",
    ),
)
EST = "infercast estimate --profile builtin {model} --hardware {hw} --prompt 4096 --json"
LINK = (
    "infercast simulate --profile builtin --model llama-3.1-8b --hardware {hw} --weights bf16 "
    "--num-prompts 2 --request-rate 1 --prefix-caching --kv-offload-gib 1 --no-progress --json"
)
SIM = (
    "infercast simulate --profile builtin --model llama-3.1-8b --hardware h100-sxm --weights bf16 "
    "--max-concurrency 64 --num-prompts 1500 --input-tokens 4500 --output-tokens 128 "
    "--prefix-groups 160 --prefix-tokens 4096 --prefix-caching --seed 1 --no-progress --json"
)
SETUPS = {"TP1": "--tp 1", "TP1 + 128 GiB host KV": "--tp 1 --kv-offload-gib 128", "TP2": "--tp 2"}
CLAIM = {
    "id": 17,
    "claim": "KV offload to host memory beats a bigger TP when shared prefixes outgrow HBM: "
    "reloading a token's KV over the host link is cheaper than recomputing it",
    "where": "issue 20 (production levers): a KV tier below HBM",
    "commands": [
        EST.format(model="MODEL", hw="PART")
        + "   and   "
        + LINK.format(hw="PART")
        + "   ("
        + "; ".join(f"{m} on {hw}" for _, m, hw in CASES)
        + ")",
        SIM + "   with " + " | ".join(SETUPS.values()),
    ],
}


def _per_token(model: str, hw: str) -> dict:
    est, link = infercast(EST.format(model=model, hw=hw)), infercast(LINK.format(hw=hw))
    mem = est["memory"]
    kv_bytes = mem["kv_bytes"] / (mem["batch"] * mem["context"])  # per token, per GPU
    recompute = est["prefill"]["time_s"] / est["prefill"]["prompt_tokens"]
    reload = kv_bytes / link["kv_offload_link_bytes_per_s"]
    return {
        "kv_bytes_per_token": kv_bytes,
        "link_bytes_per_s": link["kv_offload_link_bytes_per_s"],
        "recompute_s_per_token": recompute,
        "reload_s_per_token": reload,
        "recompute_over_reload": recompute / reload,
    }


def run() -> dict:
    parts = {label: _per_token(model, hw) for label, model, hw in CASES}
    sims = {}
    for name, flags in SETUPS.items():
        d = infercast(f"{SIM} {flags}")
        gpus = d["config"]["tp"]
        sims[name] = {
            "gpus": gpus,
            "output_tokens_per_s_per_gpu": d["output_throughput_tokens_per_s"] / gpus,
            "ttft_p50_s": d["ttft_s"]["p50"],
            "mean_batch": d["mean_batch_size"],
            "blocks_reloaded": d.get("kv_offload_blocks_loaded", 0),
            "reload_s": d.get("kv_offload_reload_s", 0.0),
            "duration_s": d["duration_s"],
        }
    return {"per_token": parts, "simulated": sims}


def verdict(r: dict) -> tuple[str, str]:
    p, s = r["per_token"], r["simulated"]
    ratios = ", ".join(
        f"{k} {v['recompute_over_reload']:.1f}x ({v['kv_bytes_per_token'] / 1024:.0f} "
        f"KiB/token/GPU at {v['link_bytes_per_s'] / 1e9:.0f} GB/s)"
        for k, v in p.items()
    )
    one, off, two = s["TP1"], s["TP1 + 128 GiB host KV"], s["TP2"]
    gain = off["output_tokens_per_s_per_gpu"] / one["output_tokens_per_s_per_gpu"]
    vs_tp2 = off["output_tokens_per_s_per_gpu"] / two["output_tokens_per_s_per_gpu"]
    finding = (
        f"Recomputing a prompt token costs, vs reloading its KV: {ratios}. Simulated on H100 with "
        f"655k tokens of shared prefixes: TP1 {one['output_tokens_per_s_per_gpu']:,.0f} output "
        f"tok/s per GPU (TTFT p50 {one['ttft_p50_s'] * 1e3:,.0f} ms); TP1 + 128 GiB host KV "
        f"{off['output_tokens_per_s_per_gpu']:,.0f} ({gain:.2f}x; {off['blocks_reloaded']:,} "
        f"blocks reloaded in {off['reload_s']:.1f} s of PCIe transfer, TTFT p50 "
        f"{off['ttft_p50_s'] * 1e3:,.0f} ms); TP2 {two['output_tokens_per_s_per_gpu']:,.0f} per "
        f"GPU (TTFT p50 {two['ttft_p50_s'] * 1e3:,.0f} ms)."
    )
    if min(v["recompute_over_reload"] for v in p.values()) > 1 and vs_tp2 > 1:
        if two["ttft_p50_s"] < off["ttft_p50_s"]:
            return CONDITIONAL, (
                finding + f" Per GPU (so per dollar) the host tier wins: {vs_tp2:.2f}x TP2's "
                "throughput. TP2 answers far sooner: its KV pool keeps the prefixes resident "
                "(no copy, no queue behind recomputes) and its compute is doubled. Offload is the "
                "throughput-per-dollar choice; a tight TTFT SLO still wants the second GPU."
            )
        return REPRODUCED, finding
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
