"""One leave-one-source-out fold, row by row: what a held-out source's rows lose, and which fields.

    python benchmarks/loso_fold.py SOURCE [--profile shipped] [--by group,scenario,hardware,model]

Runs ``infercast calibrate``'s procedure on the closed forms (``validate/calibrate.py``
``fit_profiles``) twice: on every fit row (the fresh fit) and without ``SOURCE`` (the fold), then
prints, for the source's fit rows grouped by ``--by``: rows, median absolute % error with the
profile (``--profile``, the shipped one by default), the fresh fit and the fold, and the fold's
median signed error; then every field of a group the source's rows use that the fold moves by
more than 5 % from the fresh fit. The held-out score equals ``calibrate``'s on the simulated path
for sources without concurrency rows (their rows are closed-form rows on both paths; the simulated
path refits only the concurrency TTFT overhead). docs/history/validation.md ("v0.9 and v1.0 held
out") reads TRT-LLM v0.9's and v1.0's folds with it.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from infercast.cost.efficiency import FIELD_NAMES
from infercast.cost.profiles import load_profile_set
from infercast.validate.calibrate import Calibrator, fit_profiles
from infercast.validate.cases import load_cases

KEYS = {"group", "scenario", "hardware", "model", "metric", "input_tokens", "output_tokens"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--profile", default="shipped")
    ap.add_argument("--by", default="group,scenario,hardware,model")
    args = ap.parse_args()
    by = args.by.split(",")
    if not set(by) <= KEYS:
        ap.error(f"--by takes a comma list of {', '.join(sorted(KEYS))}")
    cal = Calibrator(load_cases())
    held = np.array([i for i in cal.rows() if cal.ev.cases[i].source == args.source])
    if not held.size:
        ap.error(f"no fit row has source {args.source!r}")
    sets = {
        "profile": load_profile_set(args.profile),
        "fresh": fit_profiles(cal, None),
        "fold": fit_profiles(cal, None, exclude_source=args.source),
    }
    err = {k: cal.predict(p, held) / cal.measured[held] - 1 for k, p in sets.items()}
    groups = defaultdict(list)
    for j, i in enumerate(held):
        c = cal.ev.cases[i]
        key = {"group": cal.ev.groups[cal.group_of[i]], **vars(c)}
        groups[tuple(str(key[k]) for k in by)].append(j)
    print(f"{args.source}: {held.size} fit rows; median |error| % (profile / fresh fit / fold)")
    rows = [("all", list(range(held.size)))] + [(" ".join(k), v) for k, v in sorted(groups.items())]
    for name, js in rows:
        cells = " ".join(f"{np.median(np.abs(err[k][js])) * 100:6.1f}" for k in err)
        print(f"  {name:60s} {len(js):4d} {cells}   fold signed {np.median(err['fold'][js]):+.3f}")
    print("fields the fold moves > 5 % from the fresh fit (groups this source's rows use):")
    for g in sorted({cal.ev.groups[cal.group_of[i]] for i in held}):
        a, b = sets["fresh"].for_group(g), sets["fold"].for_group(g)
        for f in FIELD_NAMES:
            x, y = getattr(a, f), getattr(b, f)
            if max(abs(x), abs(y)) > 0 and abs(y - x) > 0.05 * max(abs(x), abs(y)):
                print(f"  {g}: {f} {x:.4g} -> {y:.4g}")


if __name__ == "__main__":
    main()
