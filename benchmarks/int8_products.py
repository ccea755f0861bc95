"""The int8 product kernels on SmolLM2-135M's shapes, old and new alternated in one process.

For each token count, SmolLM2-135M's chain of 120 layer products (per layer: QKV 960x576,
O 576x576, gate/up 3072x576, down 576x1536; 30 layers, 106 M weights, so they come from
DRAM as in a decode step) and its 49152x576 head, as ``Int8Matrix`` keeps them (int8 rows,
one scale each), through: the float loop (``decode_jit.int8_matmul``: each weight widened
to float32), the integer kernel (``decode_jit.int8_int_kernels``, this CPU's variant: the
activations quantized to two 8-bit planes, integer dot products), and PyTorch's
``_weight_int8pack_mm``. Rounds alternate the kernels; best process CPU ms of each, the
bytes it read (the int8 rows and 4-byte scales) per second, and that rate over the machine's
read rate (``machine_probe.read_bandwidth``, measured at the start and the end).

    python benchmarks/int8_products.py --tokens 1,2,4,8 --rounds 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536))  # (out, in) per layer
LAYERS = 30
HEAD = (49152, 576)


def _cpu(fn) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3, help="timed calls of each kernel a round")
    args = ap.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    from infercast.engine.decode_jit import int8_int_kernels, kernels, q4_isa
    from infercast.engine.machine_probe import read_bandwidth, stream_bytes
    from infercast.engine.qformats import quantize_int8_rows

    torch.set_num_threads(1)
    isa = q4_isa()
    jit = kernels()
    int_mm = int8_int_kernels(isa)[0] if isa else None
    rng = np.random.default_rng(0)

    def matrices(n, k, count):
        """``count`` matrices, views of one [count, n, k] array as the fused step stacks them
        (engine/decode_step.py; one large allocation: numpy asks for huge pages)."""
        qs = [quantize_int8_rows(rng.uniform(-0.05, 0.05, (n, k)).astype(np.float32))
              for _ in range(count)]  # fmt: skip
        q_all, s_all = np.stack([q for q, _ in qs]), np.stack([s for _, s in qs])
        return [
            (q, s, q.sum(axis=1, dtype=np.int32), torch.from_numpy(q),
             torch.from_numpy(s).to(torch.bfloat16))
            for q, s in zip(q_all, s_all, strict=True)
        ]  # fmt: skip

    by_shape = [matrices(n, k, LAYERS) for n, k in SHAPES]
    layers = [[mats[li] for mats in by_shape] for li in range(LAYERS)]
    head = matrices(*HEAD, 1)[0]

    def run(kind, mats, xs):
        for (q, s, ws, qt, st), x in zip(mats, xs, strict=True):
            out = np.empty((q.shape[0], x.shape[0]), dtype=np.float32)
            if kind == "float":
                jit.int8_matmul(q, s, x, out)
            elif kind == "integer":
                int_mm(q, ws, s, x, out, 1)
            else:
                torch.ops.aten._weight_int8pack_mm(torch.from_numpy(x).to(torch.bfloat16), qt, st)

    kinds = ["float", "integer", "torch"] if int_mm else ["float", "torch"]
    with threadpool_limits(1):
        bw0 = read_bandwidth(stream_bytes(), 5, 1).best
        print(f"# read rate {bw0 / 1e9:.1f} GB/s; integer variant {isa}", flush=True)
        for m in [int(t) for t in args.tokens.split(",")]:
            chains = {
                "layers": (
                    [mat for layer in layers for mat in layer],
                    [
                        rng.standard_normal((m, k), dtype=np.float32)
                        for _ in layers
                        for _, k in SHAPES
                    ],
                ),  # fmt: skip
                "head": ([head], [rng.standard_normal((m, HEAD[1]), dtype=np.float32)]),
            }
            for name, (mats, xs) in chains.items():
                nbytes = sum(q.nbytes + 4 * q.shape[0] for q, *_ in mats)
                best = {k: float("inf") for k in kinds}
                for kind in kinds:
                    run(kind, mats, xs)  # compile, warm
                for _ in range(args.rounds):
                    for kind in kinds:
                        for _ in range(args.reps):
                            t = _cpu(lambda k=kind, a=mats, x=xs: run(k, a, x))
                            best[kind] = min(best[kind], t)
                cells = ", ".join(
                    f"{k} {best[k] * 1e3:6.2f} ms {nbytes / best[k] / 1e9:5.1f} GB/s "
                    f"({nbytes / best[k] / bw0:.2f})"
                    for k in kinds
                )
                print(f"{m:>2} tokens, {name:>6} ({nbytes / 1e6:5.1f} MB): {cells}", flush=True)
        bw1 = read_bandwidth(stream_bytes(), 5, 1).best
        print(f"# read rate at the end {bw1 / 1e9:.1f} GB/s", flush=True)


if __name__ == "__main__":
    main()
