"""Where a batch-1 decode step's time goes, against the bytes it reads (issue 21 item 2).

Times ``LlamaModel.forward`` for one request's one token on ``--context`` cached tokens, with
its three parts timed in place (best process-CPU ms of ``--steps``, and the median): the
embedding row and KV slots before the fused layers, the fused layers' one compiled call
(engine/decode_step.py), and the final norm and head product after it. Then the layers' 120
products alone, in a chain (the fused step's kernel, one token, no attention or norms), and a
float32 dot product over as many bytes (numpy's sdot, machine_probe's read rate). Prints each
part's bytes and their floor at ``--bandwidth-gbs`` (docs/history/engine-weight-formats.md,
``q4floor``, has a run). Needs numba and a model whose layers run the fused step (q4, int8 or
bf16 weights).

    PYTHONPATH=$PWD/src python benchmarks/decode_step_parts.py --weights q4 --rounds 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_median(fn, n: int) -> tuple[float, float]:
    """Best and median process-CPU ms of ``n`` calls (after one warm-up)."""
    fn()
    ts = []
    for _ in range(n):
        c0 = time.process_time()
        fn()
        ts.append(time.process_time() - c0)
    return min(ts) * 1e3, float(np.median(ts)) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--weights", default="q4")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--bandwidth-gbs", type=float, default=41.2)
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    import infercast.engine.decode_step as ds
    from infercast.engine.engine import make_model
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.model import SeqInput

    loaded = load(args.model, weights=args.weights)
    cfg, w = loaded.cfg, loaded.weights
    net = make_model(loaded, args.context + 2, "numpy", 1)
    if getattr(net, "fused", None) is None:
        raise SystemExit(f"no fused step for --weights {args.weights}")
    blocks = list(range(-(-(args.context + 1) // 16)))
    kv = PagedKVStore(cfg, len(blocks), 16)
    seq = [SeqInput([7], args.context, blocks)]
    parts: dict[str, list[float]] = {}
    run, logits = net.fused.run, net._mm

    def timed(name, fn):
        def wrapper(*a):
            c0 = time.process_time()
            out = fn(*a)
            parts[name].append(time.process_time() - c0)
            return out

        return wrapper

    ds.HEAD_IN_STEP = False  # the head after the fused call, where it can be timed apart
    net.fused.run = timed("fused layers", run)
    net._mm = timed("head product", logits)
    layer_bytes = sum(a.nbytes for ws in net.fused.w for a in ws)
    head_bytes = int(w.lm_head.nbytes)
    kv_bytes = 2 * cfg.num_layers * (args.context + 1) * cfg.kv_size * 4
    bw = args.bandwidth_gbs * 1e9
    chain = _chain(net)
    a = np.ones(layer_bytes // 8, np.float32)
    b = np.ones_like(a)
    print(
        f"{args.weights}: layers {layer_bytes / 1e6:.1f} MB, KV {kv_bytes / 1e6:.1f} MB, head "
        f"{head_bytes / 1e6:.1f} MB: floor {(layer_bytes + kv_bytes + head_bytes) / bw * 1e3:.2f}"
        f" ms at {args.bandwidth_gbs} GB/s (layers {layer_bytes / bw * 1e3:.2f}, KV "
        f"{kv_bytes / bw * 1e3:.2f}, head {head_bytes / bw * 1e3:.2f})"
    )
    with threadpool_limits(1):
        for _ in range(args.rounds):
            parts = {"fused layers": [], "head product": []}
            step = best_median(lambda: net.forward(seq, kv), args.steps)
            fused = min(parts["fused layers"]) * 1e3, float(np.median(parts["fused layers"])) * 1e3
            head = min(parts["head product"]) * 1e3, float(np.median(parts["head product"])) * 1e3
            rows = {
                "step": step,
                "fused layers": fused,
                "head product": head,
                "layer products alone": best_median(chain, args.steps) if chain else (0, 0),
                "sdot over the layers' bytes": best_median(lambda: np.dot(a, b), args.steps),
            }
            print("  ".join(f"{k} {v[0]:.3f}/{v[1]:.3f}" for k, v in rows.items()), flush=True)


def _chain(net):
    """The fused step's q4 kernel over every layer matrix, one token, in one compiled loop (the
    activation quantized per product, as in the step); None for other layouts."""
    from numba import njit

    from infercast.engine.decode_jit import kernels

    w = [ws[0] for ws in net.fused.w]
    jit = kernels()
    if any(len(ws) != 1 or ws[0].dtype != np.uint8 for ws in net.fused.w) or jit.q4i_blocks is None:
        return None
    quantize, blocks = jit.q4i_quantize, jit.q4i_blocks

    @njit(nogil=True)
    def chain(w0, w1, w2, w3, x, out):  # pragma: no cover - compiled
        for li in range(w0.shape[0]):
            for m in (w0, w1, w2, w3):
                qv = m[li]
                nc, ng = qv.shape[0], qv.shape[1]
                xq = np.empty(ng * 64, dtype=np.int8)
                xd = np.empty(ng, dtype=np.float32)
                xs = np.empty(ng, dtype=np.float32)
                quantize(x[: ng * 32], xq, xd, xs)
                blocks(qv, xq, xd, xs, out, 0, 0, nc)

    x = np.random.default_rng(0).standard_normal(max(m.shape[2] * 32 for m in w))
    x = x.astype(np.float32)
    out = np.zeros((max(m.shape[1] for m in w) * 64, 1), np.float32)
    return lambda: chain(*w, x, out)


if __name__ == "__main__":
    main()
