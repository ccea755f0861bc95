"""Claim 22: claim 7 measured on a GPU: INT4 weights speed batch-1 decode of an H200, not a busy
step; FP8 speeds both.

Claim 7 checks the seed's quantization claim with ``estimate``; claim 12 measures it on the
CPU engine. Here the numbers are infercast's own timings of Llama-3.1-8B steps on one H200
SXM (the shipped measurement rows ``H200S-*`` and ``H200Q-*``: ``benchmarks/gpu_steps.py``,
PyTorch with CUDA graphs and FlashAttention, bf16, fp8 W8A8 and weight-only int4 through
PyTorch's tinygemm kernel; how they were taken: ``docs/h200-steps.md``). Speed-up = bf16 time
/ quantized time at batch 1, 8 and 256 (context 1,024) and on an 8,192-token prefill, next to
``estimate``'s prediction for the same steps. The rows are read from the shipped
``measurements.csv``, so the example needs no GPU; the verdict is computed from them.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, decode_row, infercast, main

BASE = "infercast estimate --profile builtin --model llama-3.1-8b --hardware h200-sxm"
WEIGHTS = ("bf16", "fp8", "int4")
BATCHES = (1, 8, 256)
CONTEXT, PROMPT = 1024, 8192
CLAIM = {
    "id": 22,
    "claim": "Measured on an H200: INT4 weights speed up a memory-bound batch-1 decode and not a "
    "busy server's step; FP8 W8A8 speeds both (claim 7, timed on a GPU)",
    "where": "seed, the quantization section (as claim 7)",
    "commands": [
        "shipped rows H200S-*, H200Q-* (benchmarks/gpu_steps.py on one H200 SXM, "
        "docs/h200-steps.md): Llama-3.1-8B steps, W = bf16, fp8, int4",
        f"{BASE} --weights W --prompt {PROMPT} --batch 1,8,256 --context {CONTEXT} --json",
    ],
}


def measured() -> dict:
    """{weights: {step: seconds}} from the shipped H200 rows of Llama-3.1-8B."""
    from infercast.validate.cases import load_cases

    out: dict[str, dict[str, float]] = {w: {} for w in WEIGHTS}
    for c in load_cases():
        if not c.source.startswith("infercast-gpu-steps") or c.model != "llama-3.1-8b":
            continue
        if c.metric == "decode_step_s" and c.input_tokens == CONTEXT and c.batch in BATCHES:
            out[c.weights][f"decode_b{c.batch}_s"] = c.value
        elif c.metric == "prefill_time_s" and c.input_tokens == PROMPT and c.batch == 1:
            out[c.weights]["prefill_8192_s"] = c.value
    return out


def predicted() -> dict:
    out = {}
    for w in WEIGHTS:
        est = infercast(f"{BASE} --weights {w} --prompt {PROMPT} --batch 1,8,256 "
                        f"--context {CONTEXT} --json")  # fmt: skip
        out[w] = {f"decode_b{b}_s": decode_row(est, b)["step_time_s"] for b in BATCHES}
        out[w]["prefill_8192_s"] = est["prefill"]["time_s"]
    return out


def run() -> dict:
    times = {"measured": measured(), "predicted": predicted()}
    speedup = {
        kind: {
            w: {k: t["bf16"][k] / t[w][k] for k in t["bf16"] if k in t[w]} for w in ("fp8", "int4")
        }
        for kind, t in times.items()
    }
    return {"times": times, "speedup": speedup}


def verdict(r: dict) -> tuple[str, str]:
    m, p = r["speedup"]["measured"], r["speedup"]["predicted"]
    steps = (
        ("decode_b1_s", "batch 1"),
        ("decode_b8_s", "batch 8"),
        ("decode_b256_s", "batch 256"),
        ("prefill_8192_s", "an 8192-token prefill"),
    )

    def row(w: str) -> str:
        return ", ".join(f"{m[w][k]:.2f}x at {name} (estimate {p[w][k]:.2f}x)" for k, name in steps)

    finding = (
        f"Llama-3.1-8B on one H200, speed-up over bf16 measured (estimate --profile builtin): "
        f"INT4 weight-only (PyTorch's tinygemm kernel) {row('int4')}; FP8 W8A8 {row('fp8')}."
    )
    i4, f8 = m["int4"], m["fp8"]
    int4_b1 = i4["decode_b1_s"] > 1.2
    int4_busy_flat = i4["decode_b256_s"] < 1.1 and i4["prefill_8192_s"] < 1.1
    fp8_both = f8["decode_b1_s"] > 1.1 and min(f8["decode_b256_s"], f8["prefill_8192_s"]) > 1.1
    if int4_b1 and int4_busy_flat and fp8_both:
        return REPRODUCED, (
            finding + " INT4 helps only the memory-bound step; this int4 kernel, made for a few "
            "rows, even slows the busy steps, where estimate assumes one that keeps bf16's "
            "tensor-core rate (serving engines use such kernels at large batch)."
        )
    if int4_b1 or fp8_both:
        return CONDITIONAL, finding
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
