"""Prefill-size q4 and int8 products: the integer kernels vs widened tiles + OpenBLAS.

For each ``--tokens`` count, a chain of weight products in ``q4`` (``Int4Matrix``, the numba
layout) and ``int8`` (``Int8Matrix``) through: the integer kernel of this CPU
(``decode_jit``: ``q4i``, q4 groups by int8-quantized activations; ``int8i``, int8 rows by
activations quantized to two 8-bit planes a token) and the path prefill takes beyond
``qlinear.KERNEL_MAX_TOKENS`` (tiles of the matrix widened to float32, then OpenBLAS:
``widen.tiled_product``). On ``--threads`` N both take ``threads.product_threads``' choice
for their path (the integer kernels split a product of enough work between N threads; the
widening stays on one between OpenBLAS products on N). Rounds alternate the paths; prints the
best process CPU and wall ms of each and the integer kernel's rate (2 x weights x tokens per
CPU second).

``--shapes smollm2``: SmolLM2-135M's 120 layer products (per layer: QKV 960x576, O 576x576,
gate/up 3072x576, down 576x1536; 30 layers). ``--shapes 8b``: Llama-3-8B's O 4096x4096,
gate 14336x4096 and down 4096x14336 (one of each; random weights either way).

    python benchmarks/int_prefill.py --tokens 49,64,128,256,512 --threads 1,2 --rounds 3

``--quality``: SmolLM2-135M's Q4_1 file prefilled with each integer kernel and with widened
tiles (``qlinear.INT_PREFILL`` on and off), the last token's logits
after prompts of ``--tokens`` tokens (a fixed English text) against the fp32 weights': the
largest difference over fp32's largest logit, and whether the argmax agrees.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

SHAPES = {
    "smollm2": [(960, 576), (576, 576), (3072, 576), (576, 1536)] * 30,
    "8b": [(4096, 4096), (14336, 4096), (4096, 14336)],
}
TEXT = (
    "The history of the printing press begins in the fifteenth century, when Johannes "
    "Gutenberg combined movable metal type, oil-based ink and a wooden press adapted from "
    "those used to make wine. Before that, books in Europe were copied by hand, usually by "
    "monks working in monasteries, and a single Bible could take a scribe more than a year. "
    "The new method spread quickly: by the year 1500 printing shops operated in more than two "
    "hundred cities, and millions of books had been produced. Printed books were cheaper, "
    "more uniform and easier to correct than manuscripts, and scholars could for the first "
    "time refer to the same page of the same edition. The consequences reached far beyond "
    "scholarship. Pamphlets carried religious and political arguments to readers who had never "
    "owned a book, newspapers appeared in the seventeenth century, and literacy rose steadily. "
)


def chain(fmt: str, shapes, rng):
    from infercast.engine.qformats import quantize_q4
    from infercast.engine.qlinear import Int4Matrix, Int8Matrix

    out = []
    for s in shapes:
        w = rng.uniform(-0.05, 0.05, s).astype(np.float32)
        out.append(Int4Matrix(quantize_q4(w)) if fmt == "q4" else Int8Matrix(w))
    return out


def paths(mats, xs, scratch):
    """{name: fn} of the integer kernel and the widened tiles over ``mats``: the engine's own
    products (``matmul_fm``) with ``qlinear.INT_PREFILL`` on and off."""
    import infercast.engine.qlinear as ql

    def run(on):
        ql.INT_PREFILL = on
        for m in mats:
            m.matmul_fm(xs[m.shape[1]], scratch)

    return {"integer": lambda: run(True), "widen": lambda: run(False)}


def timing(args) -> None:
    from threadpoolctl import threadpool_limits

    from infercast.engine.decode_jit import q4_isa
    from infercast.engine.qlinear import Scratch

    rng = np.random.default_rng(0)
    shapes = SHAPES[args.shapes]
    flops_per_token = 2.0 * sum(n * k for n, k in shapes)
    print(f"# load {os.getloadavg()[0]:.2f}, isa {q4_isa()}, shapes {args.shapes}", flush=True)
    for fmt in args.formats.split(","):
        mats = chain(fmt, shapes, rng)
        for threads in [int(v) for v in args.threads.split(",")]:
            scratch = Scratch(threads)
            for t in [int(v) for v in args.tokens.split(",")]:
                xs = {k: rng.standard_normal((k, t)).astype(np.float32) for _, k in shapes}
                fns = paths(mats, xs, scratch)
                best = dict.fromkeys(fns, np.inf)
                wall = dict.fromkeys(fns, np.inf)
                with threadpool_limits(threads):
                    for fn in fns.values():
                        fn()
                    for _ in range(args.rounds):
                        for name, fn in fns.items():
                            c0, w0 = time.process_time(), time.perf_counter()
                            fn()
                            best[name] = min(best[name], time.process_time() - c0)
                            wall[name] = min(wall[name], time.perf_counter() - w0)
                row = ", ".join(f"{k} {best[k] * 1e3:.1f} / {wall[k] * 1e3:.1f}" for k in fns)
                rate = flops_per_token * t / best["integer"] / 1e9
                print(
                    f"{fmt:>4} {threads} thread(s) {t:4d} tokens, ms CPU / wall: {row}; "
                    f"integer {rate:.0f} GOP/s CPU, widen / integer "
                    f"{best['widen'] / best['integer']:.2f} CPU "
                    f"{wall['widen'] / wall['integer']:.2f} wall",
                    flush=True,
                )
    print(f"# load {os.getloadavg()[0]:.2f}")


def quality(args) -> None:
    import infercast.engine.qlinear as ql
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.model import LlamaModel, SeqInput

    tokens = [int(v) for v in args.tokens.split(",")]
    ref = load("smollm2-135m", weights="fp32")
    ids = ref.tokenizer.encode(TEXT * (1 + max(tokens) // 150))
    if len(ids) < max(tokens):
        raise SystemExit(f"the text has {len(ids)} tokens, fewer than {max(tokens)}")

    def last_logits(loaded, n):
        net = LlamaModel(loaded.cfg, loaded.weights, n + 16)
        kv = PagedKVStore(loaded.cfg, -(-n // 16) + 1, 16)
        table = list(range(-(-n // 16) + 1))
        return net.forward([SeqInput(ids[:n], 0, table)], kv)[0]

    want = {n: last_logits(ref, n) for n in tokens}
    saved = ql.INT_PREFILL
    for fmt in args.formats.split(","):
        loaded = load("smollm2-135m", weights=fmt)
        for name, on in (("widen", False), ("integer", True)):
            ql.INT_PREFILL = on
            row = []
            for n in tokens:
                got, ref_n = last_logits(loaded, n), want[n]
                diff = float(np.abs(got - ref_n).max() / np.abs(ref_n).max())
                same = "" if got.argmax() == ref_n.argmax() else " (argmax differs)"
                row.append(f"{n}: {diff:.2%}{same}")
            print(f"{fmt:>5} {name:>7}: largest logit difference vs fp32, " + ", ".join(row))
    ql.INT_PREFILL = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="49,64,128,256,512")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--formats", default="q4,int8")
    ap.add_argument("--chunk", type=int, help="qlinear.INT_PREFILL_CHUNK_TOKENS")
    ap.add_argument("--shapes", choices=sorted(SHAPES), default="smollm2")
    ap.add_argument("--quality", action="store_true", help="prefill logits against fp32's")
    args = ap.parse_args()
    if args.chunk:
        import infercast.engine.qlinear as ql

        ql.INT_PREFILL_CHUNK_TOKENS = args.chunk
    (quality if args.quality else timing)(args)


if __name__ == "__main__":
    main()
