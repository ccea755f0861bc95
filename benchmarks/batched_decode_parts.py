"""Where a batched decode step's time goes, per-product path against the batched fused step.

For each ``--weights`` format and ``--batches`` size: B requests decoding one token each on
``--context`` cached tokens (SmolLM2-135M by default), one thread. The per-product path
(``decode_step.ENABLED`` off: every product a kernel call from Python) is split with cProfile
(process-CPU timer) into the product kernels (numba's, or PyTorch's inside
``Bf16Matrix.matmul_fm``), the attention kernel and the rest (the unprofiled step less both:
Python and numpy between the calls). Then both paths' best process-CPU ms, alternated
``--rounds`` times in one process (engine/decode_step.py ``run_many``; docs/history/
engine-weight-formats.md, ``batchfuse``, has a run).

    PYTHONPATH=$PWD/src python benchmarks/batched_decode_parts.py --weights q4,int8 \\
        --batches 2,4,8,32
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time


def best_cpu_ms(fn, n: int) -> float:
    """Best process-CPU ms of ``n`` calls (after one warm-up)."""
    fn()
    ts = []
    for _ in range(n):
        c0 = time.process_time()
        fn()
        ts.append(time.process_time() - c0)
    return min(ts) * 1e3


def split_ms(fn, n: int, fmt: str, batch: int) -> tuple[float, float]:
    """cProfile's product-kernel and attention-kernel ms a step (process-CPU timer)."""
    pr = cProfile.Profile(time.process_time)
    pr.enable()
    for _ in range(n):
        fn()
    pr.disable()
    prod = att = 0.0
    for (path, _, name), (_, _, tt, _, _) in pstats.Stats(pr).stats.items():
        if "decode_jit" in path and name.endswith("matmul"):
            prod += tt
        elif "decode_jit" in path and name == "attend":
            att += tt
        elif name.startswith("_weight_int") or "torch" in name:
            prod += tt
        elif fmt == "bf16" and "qlinear" in path and name == "matmul_fm":
            # beyond its loop's tokens PyTorch's bf16 matmul (``@``) runs inside, unprofiled
            prod += tt if batch > 4 else 0.0
    return prod / n * 1e3, att / n * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--weights", default="q4,int8,bf16,auto")
    ap.add_argument("--batches", default="2,4,8,32")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    import infercast.engine.decode_step as ds
    from infercast.engine.engine import make_model
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.model import SeqInput

    per = -(-(args.context + 1) // 16)
    for fmt in args.weights.split(","):
        loaded = load(args.model, weights=fmt)
        net = make_model(loaded, args.context + 2, "numpy", 1)
        for b in [int(x) for x in args.batches.split(",")]:
            kv = PagedKVStore(loaded.cfg, b * per, 16)
            seqs = [
                SeqInput([7], args.context, list(range(i * per, (i + 1) * per))) for i in range(b)
            ]

            def step(net=net, seqs=seqs, kv=kv):
                net.forward(seqs, kv)

            old, new = [], []
            with threadpool_limits(1):
                for _ in range(args.rounds):
                    ds.ENABLED = False
                    old.append(best_cpu_ms(step, args.steps))
                    ds.ENABLED = True
                    new.append(best_cpu_ms(step, args.steps))
                ds.ENABLED = False
                prod, att = split_ms(step, args.steps, fmt, b)
                ds.ENABLED = True
            fused = net.fused is not None and 2 <= b <= net.fused.max_tokens
            print(
                f"{fmt:>5} b={b:2}: per-product {min(old):6.2f} ms (products {prod:6.2f}, "
                f"attention {att:5.2f}, rest {min(old) - prod - att:5.2f}); "
                f"{'batched fused' if fused else 'per-product again'} {min(new):6.2f} "
                f"(rounds: {' '.join(f'{o:.2f}/{n:.2f}' for o, n in zip(old, new, strict=True))})",
                flush=True,
            )


if __name__ == "__main__":
    main()
