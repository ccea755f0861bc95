"""Greedy decode of SmolLM2-135M's Q4_1 file with the float and the integer q4 and int8
kernels, against the file's weights dequantized to float32.

For each of 8 fixed prompts, 24 greedy tokens: (a) free-running, the tokens that equal
fp32's at the same position; (b) teacher-forced on fp32's tokens, every decode step's
largest logit difference relative to fp32's largest logit, and the steps whose argmax
equals fp32's. Formats: ``auto`` (Q4_1 layers, int8 head), ``q4`` (head requantized
to 4 bits) and ``int8`` (every matrix requantized to int8 rows); ``-float`` runs their 1-4
token q4 products on the float kernel and their int8 products on the float loop
(``decode_jit.Q4_INT`` and ``INT8_INT`` off: float32 activations), the rest on the integer
kernels (activations quantized to int8 groups of 32 for q4, to two 8-bit planes a token
for int8). One thread.

    python benchmarks/q4_decode_quality.py
"""

from __future__ import annotations

import argparse

import numpy as np

PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):",
    "Water boils at",
    "Once upon a time, there was a",
    "The three primary colors are",
    "import numpy as np\n",
    "The largest planet in the solar system is",
    "To make a cup of tea, first",
)


def _run(net, cfg, ids: list[int], n: int, forced: list[int] | None):
    """n greedy tokens after the prompt (or the forced ones' argmaxes) and each decode
    step's logits."""
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.model import SeqInput

    table = list(range(8))
    kv = PagedKVStore(cfg, 8, 16)
    logits = net.forward([SeqInput(ids, 0, table)], kv)[0]
    toks, steps = [int(logits.argmax())], []
    for i in range(n - 1):
        feed = forced[i] if forced is not None else toks[-1]
        logits = net.forward([SeqInput([feed], len(ids) + i, table)], kv)[0]
        steps.append(logits.copy())
        toks.append(int(logits.argmax()))
    return toks, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="auto-float,auto,q4-float,q4,int8-float,int8")
    ap.add_argument("--tokens", type=int, default=24)
    args = ap.parse_args()
    import infercast.engine.decode_jit as dj
    from infercast.engine.loader import load
    from infercast.engine.model import LlamaModel

    ref = load("smollm2-135m", weights="fp32")
    ref_net = LlamaModel(ref.cfg, ref.weights, 256)
    prompts = [ref.tokenizer.encode(p) for p in PROMPTS]
    want = [_run(ref_net, ref.cfg, ids, args.tokens, None) for ids in prompts]
    print(f"isa {dj.q4_isa()}; {len(PROMPTS)} prompts x {args.tokens} greedy tokens vs fp32")
    for fmt in args.formats.split(","):
        dj.Q4_INT = dj.INT8_INT = not fmt.endswith("-float")
        loaded = load("smollm2-135m", weights=fmt.removesuffix("-float"))
        net = LlamaModel(loaded.cfg, loaded.weights, 256)
        free = forced_agree = steps = 0
        worst = 0.0
        for ids, (ref_toks, ref_steps) in zip(prompts, want, strict=True):
            toks, _ = _run(net, loaded.cfg, ids, args.tokens, None)
            free += sum(a == b for a, b in zip(toks, ref_toks, strict=True))
            _, got = _run(net, loaded.cfg, ids, args.tokens, ref_toks)
            for g, r in zip(got, ref_steps, strict=True):
                worst = max(worst, float(np.abs(g - r).max() / np.abs(r).max()))
                forced_agree += int(g.argmax() == r.argmax())
                steps += 1
        total = len(PROMPTS) * args.tokens
        print(
            f"{fmt:>10}: free-running {free}/{total} tokens as fp32; teacher-forced decode "
            f"argmax {forced_agree}/{steps} as fp32, largest logit difference "
            f"{worst:.2%} of fp32's largest logit",
            flush=True,
        )
    dj.Q4_INT = dj.INT8_INT = True


if __name__ == "__main__":
    main()
