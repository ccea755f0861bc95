"""Claim 16: in chat, prefix reuse is free prefill: what it saves over an hour of conversations.

``infercast simulate`` replays multi-turn sessions drawn from Mooncake's FAST'25 conversation
trace (Kimi, one hour; ``src/infercast/data/conversations/README.md``) at the trace's own
session rate (8,056 sessions in 3,537 s = 2.28 sessions/s), each turn's prompt the whole
history, on two Llama-3.1-8B BF16 replicas on H100 SXM behind a prefix-affinity router
(a session's turns stay on one replica). The same arrivals with and without prefix caching:
the saving is the prompt tokens not recomputed, their prefill FLOPs (2 N per token, N the
model's parameters: attention excluded, so a lower bound), the replicas' busy GPU time and its
dollars at the shipped H100 price, and TTFT.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

BASE = (
    "infercast simulate --profile builtin --model llama-3.1-8b --hardware h100-sxm --weights bf16 "
    "--replicas 2 --router prefix-affinity --conversations builtin --request-rate 2.28 "
    "--num-prompts 1000 --seed 1 --no-progress --json"
)
CMDS = [BASE + " --no-prefix-caching", BASE + " --prefix-caching"]
CLAIM = {
    "id": 16,
    "claim": "In multi-turn chat, prefix caching reuses the history's KV: less prefill compute, "
    "GPU time and TTFT for the same conversations",
    "where": "issue 20 (workloads as production runs them): what prefix reuse saves in a chat day",
    "commands": CMDS,
}
PARAMS = 8_030_261_248  # llama-3.1-8b, `infercast models --json` (total = active)


def _run(cmd: str) -> dict:
    d = infercast(cmd)
    return {
        k: d[k]
        for k in (
            "completed",
            "rejected",
            "total_input_tokens",
            "cached_prompt_tokens",
            "prefix_hit_rate_tokens",
            "prefix_hit_rate_requests",
            "busy_replica_s",
            "conversation_sessions",
            "conversation_turns",
            "usd_per_hour",
            "gpu_hours",
        )
    } | {
        "ttft_mean_s": d["ttft_s"]["mean"],
        "ttft_p99_s": d["ttft_s"]["p99"],
        "price_per_gpu_hour": d["usd_per_hour"] / 2,
    }


def run() -> dict:
    off, on = (_run(c) for c in CMDS)
    computed_off = off["total_input_tokens"] - off["cached_prompt_tokens"]
    computed_on = on["total_input_tokens"] - on["cached_prompt_tokens"]
    price = on["price_per_gpu_hour"]
    return {
        "off": off,
        "on": on,
        "prefill_tokens_saved": computed_off - computed_on,
        "prefill_pflop_saved": 2 * PARAMS * (computed_off - computed_on) / 1e15,
        "busy_gpu_hours_saved": (off["busy_replica_s"] - on["busy_replica_s"]) / 3600,
        "busy_usd_saved": (off["busy_replica_s"] - on["busy_replica_s"]) / 3600 * price,
        "busy_time_cut": 1 - on["busy_replica_s"] / off["busy_replica_s"],
        "ttft_mean_cut": 1 - on["ttft_mean_s"] / off["ttft_mean_s"],
    }


def verdict(r: dict) -> tuple[str, str]:
    on, off = r["on"], r["off"]
    finding = (
        f"{on['conversation_sessions']:,} sessions, {on['conversation_turns']:,} turns "
        f"({on['conversation_turns'] / on['conversation_sessions']:.2f} per session): prefix "
        f"caching serves {on['prefix_hit_rate_tokens']:.1%} of prompt tokens from the cache "
        f"({on['prefix_hit_rate_requests']:.1%} of turns hit), so prefill computes "
        f"{r['prefill_tokens_saved']:,} fewer tokens ({r['prefill_pflop_saved']:,.0f} PFLOP at 2N "
        f"per token); the two replicas are busy {r['busy_time_cut']:.1%} less "
        f"({r['busy_gpu_hours_saved']:.3f} GPU-hours, ${r['busy_usd_saved']:.2f} at "
        f"${on['price_per_gpu_hour']:.2f}/GPU-h), TTFT mean {off['ttft_mean_s'] * 1e3:,.0f} -> "
        f"{on['ttft_mean_s'] * 1e3:,.0f} ms, p99 {off['ttft_p99_s'] * 1e3:,.0f} -> "
        f"{on['ttft_p99_s'] * 1e3:,.0f} ms."
    )
    if off["ttft_mean_s"] > 10 * on["ttft_mean_s"]:
        finding += (
            " Without the cache the two replicas fall behind the sessions' arrivals (a queue "
            "builds: TTFT in minutes); with it they keep up, which is where reuse pays most."
        )
    if r["busy_time_cut"] <= 0 or r["ttft_mean_cut"] <= 0:
        return REFUTED, finding
    if on["prefix_hit_rate_tokens"] < 0.25:
        return CONDITIONAL, finding + (
            " The saving is real but modest here: three of four sessions are a single turn and the "
            "first prompt of a session (a long document, ~11k tokens) is never cached; "
            "reuse across sessions (a shared system prompt: --prefix-groups/--prefix-tokens) is "
            "left out, as the trace does not say how long it is. Longer sessions save more: the "
            "k-th turn reuses all but its new message."
        )
    return REPRODUCED, finding


if __name__ == "__main__":
    main(__import__(__name__))
