"""Does a profile group generalise inside its own rows? Split-half cross-validation of one group.

Leave-one-source-out (``infercast calibrate --cv``) cannot judge a group whose rows all come
from one source: holding the source out removes the group. This script fits the shipped set
with half of one group's rows held out (alternate rows, both halves in turn) and predicts the
held-out half twice: with the group's own fitted profile, and with the default profile the
same fit gives every row outside a group. A group worth its parameters predicts its unseen
half better than the default does.

    python benchmarks/calibrate_split_half.py --group ada/trtllm-engine [--min-group-rows 15]

Prints, per fold, the held-out median |error| and the fraction within 10 %. About a minute
per fold on one core.
"""

from __future__ import annotations

import argparse

import numpy as np

from infercast.cost.profiles import ProfileSet
from infercast.validate.calibrate import Calibrator
from infercast.validate.cases import load_cases


def split_half(group: str, min_group_rows: int) -> list[dict[str, float]]:
    cal = Calibrator(load_cases(None), min_group_rows=min_group_rows)
    every = cal.rows()
    mine = [int(i) for i in every if cal.ev.groups[cal.group_of[i]] == group]
    if len(mine) < 2 * min_group_rows:
        raise SystemExit(
            f"group {group!r} has {len(mine)} fit rows; a half needs --min-group-rows "
            f"{min_group_rows} or fewer (at most {len(mine) // 2})"
        )
    out = []
    for fold in (0, 1):
        held = np.array(mine[fold::2], dtype=np.int64)
        keep = np.array(sorted(set(every.tolist()) - set(held.tolist())), dtype=np.int64)
        cal.rows = lambda exclude_source=None, keep=keep: keep  # fit without the held-out half
        fitted = cal.fit(per_group=True).profiles
        del cal.rows
        without = ProfileSet(fitted.default, {k: v for k, v in fitted.groups.items() if k != group})
        meas = cal.measured[held]
        err_group = np.abs(cal.predict(fitted, held) / meas - 1.0)
        err_default = np.abs(cal.predict(without, held) / meas - 1.0)
        out.append(
            {
                "fold": fold,
                "held_rows": int(held.size),
                "group_fitted": group in fitted.groups,
                "median_abs_error_default_pct": float(np.median(err_default) * 100),
                "median_abs_error_group_pct": float(np.median(err_group) * 100),
                "within_10_pct_default": float(np.mean(err_default <= 0.10)),
                "within_10_pct_group": float(np.mean(err_group <= 0.10)),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", required=True, help="profile group, e.g. ada/trtllm-engine")
    ap.add_argument(
        "--min-group-rows", type=int, default=15, help="rows a group needs in the half-fit"
    )
    args = ap.parse_args()
    for r in split_half(args.group, args.min_group_rows):
        print(
            f"fold {r['fold']}: {r['held_rows']} held-out rows (group fitted: "
            f"{r['group_fitted']}): median |error| {r['median_abs_error_default_pct']:.1f} % with "
            f"the default profile -> {r['median_abs_error_group_pct']:.1f} % with the group's; "
            f"within 10 %: {r['within_10_pct_default']:.2f} -> {r['within_10_pct_group']:.2f}"
        )


if __name__ == "__main__":
    main()
