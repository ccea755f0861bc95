"""Claim 7: INT4 weight-only often does not speed up a busy, compute-bound server but does at batch
1; W8A8/FP8 does both.

``infercast estimate`` for Llama-3.1-8B on one H100 with BF16, W4A16 INT4
(4-bit weights, 16-bit math) and W8A8 FP8 weights. Three regimes: decode at
batch 1 (memory-bound), a busy compute-bound step (an 8192-token prefill, what a
chunked server runs every step under load, and decode at batch 256 on short
context), and decode at the largest BF16 batch at context 2048 (KV-bound).
Speedup = BF16 time / quantized time.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, decode_row, infercast, main

BASE = "infercast estimate --profile builtin --model llama-3.1-8b --hardware h100-sxm"
WEIGHTS = ("bf16", "int4", "fp8")
CLAIM = {
    "id": 7,
    "claim": "INT4 weight-only quantization often does not speed up a busy, compute-bound server, "
    "while it does at batch 1; W8A8 / FP8 does both",
    "where": "seed, the quantization section",
    "commands": [
        f"{BASE} --weights W --prompt 8192 --batch 1,256 --context 256 --json   (W = bf16, int4, "
        "fp8)",
        f"{BASE} --weights W --batch 1,237 --context 2048 --json",
    ],
}


def _times(w: str) -> dict:
    short = infercast(f"{BASE} --weights {w} --prompt 8192 --batch 1,256 --context 256 --json")
    long_ = infercast(f"{BASE} --weights {w} --batch 1,237 --context 2048 --json")
    return {
        "decode_b1_s": decode_row(long_, 1)["step_time_s"],
        "prefill_8192_s": short["prefill"]["time_s"],
        "decode_b256_ctx256_s": decode_row(short, 256)["step_time_s"],
        "decode_b237_ctx2048_s": decode_row(long_, 237)["step_time_s"],
        "bound_b256_ctx256": decode_row(short, 256)["bound"],
        "bound_prefill": short["prefill"]["bound"],
        "bound_b237_ctx2048": decode_row(long_, 237)["bound"],
    }


def run() -> dict:
    times = {w: _times(w) for w in WEIGHTS}
    keys = ("decode_b1_s", "prefill_8192_s", "decode_b256_ctx256_s", "decode_b237_ctx2048_s")
    speedup = {w: {k: times["bf16"][k] / times[w][k] for k in keys} for w in ("int4", "fp8")}
    return {"times": times, "speedup": speedup}


def verdict(r: dict) -> tuple[str, str]:
    i4, f8, b = r["speedup"]["int4"], r["speedup"]["fp8"], r["times"]["bf16"]

    def row(s: dict) -> str:
        return (
            f"{s['decode_b1_s']:.2f}x at batch 1, {s['prefill_8192_s']:.2f}x on an 8192-token "
            f"prefill, {s['decode_b256_ctx256_s']:.2f}x at batch 256 (context 256), "
            f"{s['decode_b237_ctx2048_s']:.2f}x at batch 237 (context 2048)"
        )

    finding = (
        f"speedup over BF16, INT4 W4A16: {row(i4)}; FP8 W8A8: {row(f8)}. BF16 bounds: prefill "
        f"{b['bound_prefill']}, batch 256 / context 256 {b['bound_b256_ctx256']}, batch 237 / "
        f"context 2048 {b['bound_b237_ctx2048']}."
    )
    int4_b1 = i4["decode_b1_s"] > 1.5
    int4_busy_flat = i4["prefill_8192_s"] < 1.1
    fp8_both = f8["decode_b1_s"] > 1.3 and f8["prefill_8192_s"] > 1.3
    if int4_b1 and int4_busy_flat and fp8_both:
        return REPRODUCED, (
            finding + " INT4 wins only where weight bytes bind; FP8 also doubles the math peak. "
            "Where KV reads bind (large batch, long context) neither weight format helps much: "
            "that server needs an FP8 KV cache."
        )
    if int4_b1 or fp8_both:
        return CONDITIONAL, finding
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
