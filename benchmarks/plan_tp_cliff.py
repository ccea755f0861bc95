"""The one-H100 capacity cliff: Llama-3.3-70B FP8 at TP1 vs TP2, predicted (nothing fitted).

TensorRT-LLM's perf tables show a 70B FP8 model on one H100 barely serving
(weights take ~70.6 of the 80 GB, so the KV cache holds a few sequences) while
two H100s serve ~8x more, not 2x. The simulator predicts it from the memory plan
and the cost model alone: offline runs (every request at t = 0), FP8 weights and
FP8 KV cache, 512 sequences / 8192 tokens per step.

Rows (``measurements.csv``, trtllm-perf-overview): the issue quotes 742 tok/s at
TP1 and 4,247 at TP2 for 1000/1000 tokens; those two rows are not in the
shipped set, so the nearest shipped rows are used (TP1 1000/2000, 1024/2048,
128/2048; TP2 1000/1000 per GPU x 2, 2048/2048, 128/4096), and the issue's pair
is printed for reference.

Two capacities: the datasheet's 80e9 bytes (NVIDIA's marketed "80 GB"), and the
85,045,477,376 bytes CUDA reports on the part (80 GiB of HBM3; shipped in
data/hardware_capacity.csv and used by default). At TP1 those 5 GB are most of the KV.

Run: python benchmarks/plan_tp_cliff.py   (about 15 s)
"""

from __future__ import annotations

import dataclasses

from infercast.cost.step import StepModel
from infercast.sim.config import build_config
from infercast.sim.run import simulate
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

DATASHEET_H100_BYTES = 80e9
# (tp, input, output, measured output tokens/s total, row id)
ROWS = [
    (1, 1000, 2000, 533.74, "TRT020-0120"),
    (1, 1024, 2048, 530.16, "TRT020-0128"),
    (1, 128, 2048, 756.42, "TRT020-0091"),
    (2, 1000, 1000, 2 * 2209.0, "TRTLAT-0062 (2209/GPU)"),
    (2, 2048, 2048, 3082.0, "TRT10-0070"),
    (2, 128, 4096, 4199.0, "TRT10-0050"),
    (1, 1000, 1000, 742.0, "issue 7 (not in the CSV)"),
    (2, 1000, 1000, 4247.0, "issue 7 (not in the CSV)"),
]


def predict(
    tp: int, inp: int, out: int, memory_bytes: float | None, num_requests: int = 600
) -> tuple[float, int]:
    hw = load_hardware("h100-sxm")
    if memory_bytes is not None:
        hw = dataclasses.replace(hw, memory_bytes=memory_bytes)
    sm = StepModel(
        load_model("llama-3.3-70b"),
        hw,
        Precision.parse("fp8", "fp8"),
        Parallelism(tp=tp),
        max_batched_tokens=8192,
        max_seqs=512,
    )
    cfg = build_config(
        {
            "model": "llama-3.3-70b",
            "hardware": "h100-sxm",
            "weights": "fp8",
            "kv_cache": "fp8",
            "tp": tp,
            "scheduler": {"max_num_seqs": 512, "max_num_batched_tokens": 8192},
            "workload": {
                "arrival": "offline",
                "num_requests": num_requests,
                "input": {"mean": inp},
                "output": {"mean": out},
            },
        }
    )
    return simulate(cfg, sm).summary.output_throughput_tps, sm.kv_capacity_tokens


def main() -> None:
    print(
        f"{'TP':>2} {'in/out':>10} {'measured':>9} {'80e9 B':>8} {'err':>7} {'85.0e9 B':>9} "
        f"{'err':>7}  row"
    )
    cache: dict = {}
    for tp, inp, out, meas, row in ROWS:
        preds = []
        for mem in (DATASHEET_H100_BYTES, None):
            key = (tp, inp, out, mem)
            if key not in cache:
                cache[key] = predict(tp, inp, out, mem)
            preds.append(cache[key][0])
        print(
            f"{tp:>2} {inp:>5}/{out:<4} {meas:9.0f} {preds[0]:8.0f} {preds[0] / meas - 1:+7.0%} "
            f"{preds[1]:9.0f} {preds[1] / meas - 1:+7.0%}  {row}"
        )
    for mem, name in (
        (DATASHEET_H100_BYTES, "datasheet 80e9 B"),
        (None, "CUDA-visible 85.0e9 B (shipped)"),
    ):
        t1, k1 = cache[(1, 1000, 1000, mem)]
        t2, k2 = cache[(2, 1000, 1000, mem)]
        print(
            f"{name}: KV capacity {k1:,} tokens at TP1 vs {k2:,} at TP2; 1000/1000 throughput "
            f"ratio TP2/TP1 = {t2 / t1:.1f}x (issue: 4247/742 = {4247 / 742:.1f}x)"
        )


if __name__ == "__main__":
    main()
