"""Machine instructions of the simulator's benchmark workloads, two trees compared.

Each workload of ``benchmarks/sim_speed.py`` (fast mode with the real cost model, the
simulator alone with the constant-time stand-in, exact mode, and an offline run) runs in
its own process under ``valgrind --tool=callgrind`` with instrumentation off until
``simulate`` starts and off again when it returns (callgrind's client requests, through a
two-function C library built here with ``cc``), so the count covers the run alone: not
the imports, the cost model's construction or the warm-up run. Instruction counts do not
depend on the machine's load, so they resolve differences of a percent that timing pairs on
a shared machine cannot; ``--pairs N`` adds N alternated CPU-time pairs (fast mode, no
valgrind) as a second measure.

    python benchmarks/sim_instructions.py                     # 4edeabe vs this working tree
    python benchmarks/sim_instructions.py --old main --new HEAD --pairs 3
    python benchmarks/sim_instructions.py --workloads fast,alone --scale 2

A revision is materialized with ``git archive`` under ``--cache`` (reused by commit);
``--new WORKTREE`` (the default) is this checkout's ``src/`` as it is on disk. Both trees
run this file's workloads (imported from this checkout's ``sim_speed.py``), with
``PYTHONHASHSEED=0`` and one BLAS thread. Prints instructions per request for each tree and
their ratio (new / old) per workload, then the geometric mean.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKTREE = "WORKTREE"

# name -> (requests, mode, arrivals, cost model): the runs of sim_speed.py, scaled down so a
# tree's four runs take a few minutes under callgrind (~50x slower than a plain run). Below
# ~10k requests a run is mostly its start (time-series samples every step, cost-model memo
# misses), which hides part of the simulator's own cost.
WORKLOADS = {
    "fast": (10_000, "fast", "poisson", "real"),
    "alone": (10_000, "fast", "poisson", "constant"),
    "exact": (3000, "exact", "poisson", "real"),
    "offline": (10_000, "fast", "offline", "real"),
}

_CG_SOURCE = """
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def build_toggle_lib(out_dir: Path) -> Path:
    """Compile the client-request library (a no-op outside valgrind)."""
    lib = out_dir / "cgtoggle.so"
    if not lib.exists():
        src = out_dir / "cgtoggle.c"
        src.write_text(_CG_SOURCE)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def tree_src(rev: str, cache: Path) -> Path:
    """The ``src/`` folder of a revision (``WORKTREE``: this checkout's, as on disk)."""
    if rev == WORKTREE:
        return ROOT / "src"
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dest = cache / sha[:12]
    if not (dest / "src").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", sha, "src"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src"


def child_env(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=f"{src}{os.pathsep}{HERE}",
        PYTHONHASHSEED="0",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
    )
    return env


def child(name: str, num_requests: int, rate: float, lib: str | None) -> None:
    """Run one workload (inside the child process); print its CPU seconds."""
    import sim_speed  # this checkout's benchmark; ``infercast`` comes from the tree under test

    from infercast.sim.run import simulate

    _, mode, arrivals, cost = WORKLOADS[name]
    model = sim_speed.build_step_model(sim_speed.config(1, None))
    simulate(sim_speed.config(2_000, rate), model)  # warm the cost model's caches, as sim_speed
    timer = sim_speed.ConstantModel(model) if cost == "constant" else model
    cfg = sim_speed.config(num_requests, None if arrivals == "offline" else rate, mode)
    cg = ctypes.CDLL(lib) if lib else None
    t0 = time.process_time()
    if cg is not None:
        cg.cg_start()
    simulate(cfg, timer)
    if cg is not None:
        cg.cg_stop()
    print(f"cpu_s {time.process_time() - t0:.6f}")


def capacity_rate() -> float:
    """80 % of the offline capacity, as sim_speed.py (this checkout's code)."""
    sys.path.insert(0, str(HERE))
    import sim_speed

    from infercast.sim.run import simulate

    model = sim_speed.build_step_model(sim_speed.config(1, None))
    return 0.8 * simulate(sim_speed.config(10_000, None), model).summary.request_throughput_rps


def count(src: Path, name: str, n: int, rate: float, lib: Path, work: Path) -> int:
    """Total instructions (callgrind's Ir) of one workload run in the tree ``src``."""
    out = work / f"cg.{os.getpid()}.{name}.out"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--n",
        str(n),
        "--rate",
        repr(rate),
        "--lib",
        str(lib),
    ]
    proc = subprocess.run(cmd, env=child_env(src), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"callgrind run of {name} in {src} failed:\n{proc.stderr[-2000:]}")
    text = out.read_text()
    out.unlink()
    m = re.search(r"^totals: (\d+)", text, re.M)
    if m is None:
        sys.exit(f"no instruction total in callgrind's output for {name}")
    return int(m.group(1))


def cpu_pairs(old: Path, new: Path, pairs: int, n: int, rate: float) -> list[tuple[float, float]]:
    """Alternated CPU seconds of the fast workload (no valgrind): old, new, old, new, ..."""
    got = []
    for _ in range(pairs):
        pair = []
        for src in (old, new):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "fast"]
            cmd += ["--n", str(n), "--rate", repr(rate)]
            proc = subprocess.run(cmd, env=child_env(src), capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"timed run in {src} failed:\n{proc.stderr[-2000:]}")
            pair.append(float(proc.stdout.split()[-1]))
        got.append((pair[0], pair[1]))
    return got


def bad(message: str) -> None:
    """Bad input: one line naming the value and the fix, exit status 2."""
    print(message, file=sys.stderr)
    sys.exit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default="4edeabe", help="git revision (default 4edeabe)")
    ap.add_argument("--new", default=WORKTREE, help=f"git revision or {WORKTREE} (the default)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated names")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every request count")
    ap.add_argument("--pairs", type=int, default=0, help="alternated CPU-time pairs to add")
    ap.add_argument("--pair-requests", type=int, default=30_000)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "sim_instructions")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n, args.rate, args.lib)
        return
    names = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown or not names:
        bad(f"--workloads {args.workloads!r}: choose among {', '.join(WORKLOADS)}")
    if args.scale <= 0:
        bad(f"--scale {args.scale}: must be positive (1 runs the sizes in WORKLOADS)")
    if args.pairs < 0:
        bad(f"--pairs {args.pairs}: must be 0 or more")
    for tool in ("valgrind", "cc"):
        if shutil.which(tool) is None:
            bad(f"{tool} not found: install it (valgrind's callgrind counts, cc builds its toggle)")
    args.cache.mkdir(parents=True, exist_ok=True)
    try:
        old, new = tree_src(args.old, args.cache), tree_src(args.new, args.cache)
    except subprocess.CalledProcessError as err:
        bad(f"--old {args.old} / --new {args.new}: not a git revision here ({err.cmd[-1]})")
    lib = build_toggle_lib(args.cache)
    rate = capacity_rate()
    print(f"old {args.old} ({old}), new {args.new} ({new}); Poisson at {rate:.3f} req/s")
    print(f"{'workload':<10}{'requests':>9}{'old Ir/req':>13}{'new Ir/req':>13}{'new/old':>9}")
    logs = []
    for name in names:
        n = max(1, round(WORKLOADS[name][0] * args.scale))
        a = count(old, name, n, rate, lib, args.cache)
        b = count(new, name, n, rate, lib, args.cache)
        logs.append(math.log(b / a))
        print(f"{name:<10}{n:>9,}{a / n:>13,.0f}{b / n:>13,.0f}{b / a:>9.3f}")
    print(f"geometric mean new/old: {math.exp(sum(logs) / len(logs)):.3f}")
    if args.pairs:
        got = cpu_pairs(old, new, args.pairs, args.pair_requests, rate)
        print(f"CPU seconds, fast mode, {args.pair_requests:,} requests (old, new, new/old):")
        for a, b in got:
            print(f"  {a:.3f} {b:.3f} {b / a:.3f}")
        ratios = sorted(b / a for a, b in got)
        print(f"median new/old: {ratios[len(ratios) // 2]:.3f}")


if __name__ == "__main__":
    main()
