"""Speed of the estimator: one estimate in process, one step-time call, and the CLI end to end.

Run: python benchmarks/estimate_speed.py
Goal (issue 2): one estimate well under 1 ms in process; the CLI under 1 s.
Reports the median and best of repeated runs (shared, noisy machine).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from infercast import StepModel, estimate, load_hardware, load_model
from infercast.specs.precision import Precision


def timeit(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> None:
    estimate()  # warm the preset caches
    med, best = timeit(lambda: estimate(weights="fp8", kv_cache="fp8", batches=(1, 8, 32, 64)), 200)
    print(
        f"estimate() seed case, 4 batches + prefill: median {med * 1e3:.3f} ms, best "
        f"{best * 1e3:.3f} ms"
    )
    sm = StepModel(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision.parse("bf16"))
    ctx = [1000 + i for i in range(64)]
    med, best = timeit(lambda: sm.step_time_s([1] * 64, ctx), 2000)
    print(
        f"StepModel.step_time_s, 64-seq decode: median {med * 1e6:.1f} us, best {best * 1e6:.1f} us"
    )
    med, best = timeit(lambda: sm.step_time_s([512] + [1] * 63, [0] + ctx[1:]), 2000)
    print(
        f"StepModel.step_time_s, mixed prefill+decode: median {med * 1e6:.1f} us, best "
        f"{best * 1e6:.1f} us"
    )
    cli = [
        sys.executable,
        "-m",
        "infercast.cli",
        "estimate",
        "--weights",
        "fp8",
        "--kv-cache",
        "fp8",
        "--json",
    ]
    med, best = timeit(lambda: subprocess.run(cli, check=True, capture_output=True), 7)
    print(f"CLI end to end (new process, --json): median {med:.3f} s, best {best:.3f} s")


if __name__ == "__main__":
    main()
