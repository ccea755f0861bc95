"""How long validate and calibrate take on the shipped set (3,660 rows).

Run: python benchmarks/validate_speed.py   (prints wall and CPU seconds per phase, best of N)
Goal: the full shipped set in a few minutes on a 2-core CPU. Measured (2 shared cores, load
~2.5): plan every row 1.5 s CPU, predict every row 0.8 s CPU (disaggregated rows in closed
form; they were ~300 simulations, 25 s, before), floor check 1.7 s, calibrate fit 7.4 s,
leave-one-source-out CV 66 s CPU (121 s wall). Rows whose weight dtype is not stated are
planned with the checkpoint's dtype, as ``infercast validate`` does.
"""

from __future__ import annotations

import time

from infercast.cost.profiles import load_profile_set
from infercast.validate.calibrate import Calibrator
from infercast.validate.cases import load_cases
from infercast.validate.evaluate import Evaluator
from infercast.validate.score import floor_report


def timed(label: str, fn, repeat: int = 3):
    best_wall, best_cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        best_wall, best_cpu = (
            min(best_wall, time.perf_counter() - w),
            min(best_cpu, time.process_time() - c),
        )
    print(f"{label:<44} best wall {best_wall:7.2f} s  cpu {best_cpu:7.2f} s  (of {repeat})")
    return out


def main() -> None:
    cases = timed("read measurements.csv", load_cases)
    profiles = load_profile_set(None)
    ev = timed("plan every row (op ledgers)", lambda: Evaluator(cases, assume_weights="checkpoint"))
    preds = timed("predict every row (shipped profile)", lambda: ev.predict(profiles))
    timed("floor check", lambda: floor_report(cases))
    cal = timed("calibration plans", lambda: Calibrator(cases), repeat=1)
    timed("fit (default + groups)", cal.fit, repeat=1)
    timed("leave-one-source-out CV", cal.leave_one_source_out, repeat=1)
    done = sum(p.predicted is not None for p in preds)
    print(f"{done} of {len(preds)} rows predicted")


if __name__ == "__main__":
    main()
