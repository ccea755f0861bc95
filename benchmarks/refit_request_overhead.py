"""Refit each profile group's ``request_overhead_s`` alone, within its physical range.

``infercast calibrate`` runs this refit itself now (its stage 2, ``validate/simfit.py``, the
same rule on the same rows; it returns the shipped values); this script stays for its
per-group report and the closed-form variant.

    python benchmarks/refit_request_overhead.py            # print before / after per group
    python benchmarks/refit_request_overhead.py --write    # and write them into the shipped profile
    python benchmarks/refit_request_overhead.py --simulate [--store DIR] [--stated]
    python benchmarks/refit_request_overhead.py ... --groups hopper/trtllm,blackwell/trtllm

Why alone: the closed-loop TTFT is the engine's part (queue and prefill, from the other
efficiencies) plus the serving stack's per-request latency the client times
(``sim.clients``: TTFT to the first text chunk). Changing how the clients are modelled (the
wave count is now the harness's requests per client, not a fitted 6) moves only the engine's
part of TTFT, so only the stack's latency is refitted; every other efficiency keeps its
calibrated value. For each group with at least ``--min-rows`` concurrency TTFT rows the value
in ``[low, high]`` (``cost.efficiency.PHYSICAL_RANGES``) minimising the median absolute %
error of those rows is chosen on a 0.5 ms grid; a value at a bound is reported as such.

``--simulate`` fits against the simulated path (``infercast validate``'s default) instead of
the closed form. The overhead is added after the simulation (``validate.predict``), so the
simulated engine part does not depend on it and one simulation per run serves every candidate
value: the refit is exact for the simulated path. ``--stated`` fits and scores only the rows
that state their weight dtype and layout (no ``assumed_weights``, no assumed attention DP).
It also prints a split-half check (fit on alternate rows, score the other half, both ways).
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict

import numpy as np


def _median_abs_pct(engine: np.ndarray, measured: np.ndarray, overhead: float) -> float:
    return float(np.median(np.abs(engine + overhead - measured) / measured * 100))


def _stated(p) -> bool:
    """A row of stated weight dtype and layout (``validate``'s "nothing assumed")."""
    return not p.assumed_weights and not any(
        "attention data parallel assumed" in n or "MTP not simulated" in n for n in p.notes
    )


def _fit(preds, prof, grid, min_rows: int, only: frozenset = frozenset()) -> dict[str, float]:
    """Each group's overhead minimising its rows' median |error| (groups under ``min_rows``,
    those the profile does not list and, when ``only`` names groups, the others keep theirs)."""
    by_group: dict[str, list] = defaultdict(list)
    for p in preds:
        by_group[p.group].append(p)
    out = {}
    for group, rows in by_group.items():
        if len(rows) < min_rows or group not in prof.groups or (only and group not in only):
            continue
        old = prof.for_group(group).request_overhead_s
        engine = np.array([p.predicted - old for p in rows])
        measured = np.array([p.case.value for p in rows])
        errs = [_median_abs_pct(engine, measured, float(g)) for g in grid]
        out[group] = float(grid[int(np.argmin(errs))])
    return out


def _score(preds, prof, new: dict[str, float]) -> float:
    """Median |error| of ``preds`` with the overheads ``new`` in place of the profile's."""
    errs = []
    for p in preds:
        old = prof.for_group(p.group).request_overhead_s
        errs.append(abs((p.predicted - old + new.get(p.group, old)) / p.case.value - 1) * 100)
    return statistics.median(errs)


def _split_half(preds, prof, grid, min_rows: int, only: frozenset = frozenset()) -> None:
    a, b = preds[0::2], preds[1::2]
    for name, fit_on, held in (("even -> odd", a, b), ("odd -> even", b, a)):
        new = _fit(fit_on, prof, grid, min_rows, only)
        print(
            f"split half {name}: held-out median |err| {_score(held, prof, {}):.1f} -> "
            f"{_score(held, prof, new):.1f} %"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--write", action="store_true", help="write the refitted values into the shipped profile"
    )
    ap.add_argument("--min-rows", type=int, default=30)
    ap.add_argument("--simulate", action="store_true", help="fit the simulated path")
    ap.add_argument("--store", default=None, help="keep simulated results here (validate --store)")
    ap.add_argument("--stated", action="store_true", help="only rows of stated dtype and layout")
    ap.add_argument(
        "--groups", default="", help="refit (and write) only these groups, comma-separated"
    )
    args = ap.parse_args()
    only = frozenset(g for g in args.groups.split(",") if g)

    from infercast.cost.efficiency import PHYSICAL_RANGES
    from infercast.cost.profiles import load_profile_set
    from infercast.specs.catalog import data_path
    from infercast.validate.cases import load_cases
    from infercast.validate.evaluate import Evaluator

    low, high, _ = PHYSICAL_RANGES["request_overhead_s"]
    prof = load_profile_set(None)
    cases = [c for c in load_cases() if c.scenario == "concurrency" and c.metric == "ttft_mean_s"]
    store = None
    if args.store:
        from infercast.validate.simstore import SimStore

        store = SimStore(args.store)
    preds = Evaluator(
        cases, prefer_simulator=args.simulate, assume_weights="checkpoint", store=store
    ).predict(prof)
    preds = [p for p in preds if p.predicted is not None and (not args.stated or _stated(p))]
    grid = np.arange(low, high + 1e-12, 5e-4)
    _split_half(preds, prof, grid, args.min_rows // 2, only)
    by_group: dict[str, list] = defaultdict(list)
    for p in preds:
        by_group[p.group].append(p)
    new: dict[str, float] = {}
    for group, rows in sorted(by_group.items()):
        old = prof.for_group(group).request_overhead_s
        engine = np.array([p.predicted - old for p in rows])
        measured = np.array([p.case.value for p in rows])
        before = _median_abs_pct(engine, measured, old)
        if len(rows) < args.min_rows or group not in prof.groups or (only and group not in only):
            print(f"{group}: {len(rows)} rows, kept {old:.4f} s ({before:.1f} %)")
            continue
        errs = [_median_abs_pct(engine, measured, float(g)) for g in grid]
        best = float(grid[int(np.argmin(errs))])
        bound = " (at a bound)" if best in (low, high) else ""
        print(
            f"{group}: {len(rows)} rows, {old:.4f} -> {best:.4f} s{bound}, "
            f"median |err| {before:.1f} -> {min(errs):.1f} %"
        )
        new[group] = best
    all_before, after = _score(preds, prof, {}), _score(preds, prof, new)
    print(f"concurrency TTFT median |err|: {all_before:.1f} -> {after:.1f} %")
    if args.write:
        path = data_path("profiles", "default.toml")
        text = path.read_text()
        for group, value in new.items():
            head = f'[groups."{group}"]'
            start = text.index(head)
            end = text.find("\n[", start + len(head))
            end = len(text) if end < 0 else end
            section = re.sub(
                r"request_overhead_s = [0-9.e+-]+",
                f"request_overhead_s = {value:g}",
                text[start:end],
            )
            text = text[:start] + section + text[end:]
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
