"""What pins each profile field that sits on a bound of its physical range.

    python benchmarks/bounds_at_fit.py [--profile shipped] [--rows 8]

For every ``group: field`` in the profile's ``[fit] at_bounds`` (``infercast calibrate``): the
group's fit rows grouped by source, scenario, metric, dtype, model and part, each with its
sensitivity ``d log(prediction) / d log(field)`` and its median signed error (closed forms, the
fit's own predictor); then that group refitted alone with the field's range widened (as
``calibrate`` fits a group: every field, from the default profile, with the group prior), its
unbounded value and the group's median absolute error both ways. The mechanisms these name are in
``docs/validation.md`` ("Calibration").
"""

from __future__ import annotations

import argparse
import math
import re
from collections import defaultdict

import numpy as np

# widened range per field: the edge of what EfficiencyProfile accepts for fractions
WIDE = {"mem_bw_eff": (0.45, 0.999), "comm_bw_eff": (0.02, 0.9), "gemm_compute_eff": (0.1, 0.87)}
WIDE["gemm_compute_eff_8bit"] = (0.35, 0.999)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="shipped")
    ap.add_argument("--rows", type=int, default=8, help="row groups printed per bound")
    args = ap.parse_args()

    import infercast.validate.calibrate as cal_mod
    from infercast.cost.profiles import ProfileSet, load_profile_set
    from infercast.validate.cases import load_cases
    from infercast.validate.ledger import profile_matrix

    prof = load_profile_set(args.profile)
    cal = cal_mod.Calibrator(load_cases())
    rows = cal.rows()
    base_pred = cal.predict(prof, rows)
    base = np.array([profile_matrix([prof.for_group(g)])[0] for g in cal.ev.groups])
    for entry in prof.fit.get("at_bounds", []):
        m = re.match(r"([^:]+): (\w+)=", entry)
        if not m or m.group(1) == "default":
            continue
        group, field = m.groups()
        p = prof.for_group(group)
        v = getattr(p, field)
        alt = ProfileSet(prof.default, {**prof.groups, group: p.with_updates(**{field: v * 1.05})})
        sens = np.log(cal.predict(alt, rows) / base_pred) / math.log(1.05)
        g = cal.ev.groups.index(group)
        mine = np.flatnonzero(cal.group_of[rows] == g)
        print(f"== {entry}: {mine.size} fit rows")
        by: dict[tuple, list] = defaultdict(list)
        for k in mine:
            c = cal.ev.cases[rows[k]]
            key = (c.source, c.scenario, c.metric, c.weights, c.model, c.hardware)
            by[key].append((sens[k], 100 * (base_pred[k] / cal.measured[rows[k]] - 1)))
        for key, vals in sorted(by.items(), key=lambda kv: -len(kv[1]))[: args.rows]:
            a = np.array(vals)
            print(
                f"  {len(vals):3d} rows  sensitivity {np.median(a[:, 0]):+.2f}  "
                f"signed error {np.median(a[:, 1]):+6.1f} %  {' '.join(map(str, key))}"
            )
        if field not in WIDE:
            continue
        old = cal_mod.BOUNDS[field]
        cal_mod.BOUNDS[field] = WIDE[field]
        sub = rows[mine]
        prior = cal_mod.GROUP_PRIOR * math.sqrt(sub.size)
        try:
            free = cal._fit(prof.default, base, [g], sub, prior)
        finally:
            cal_mod.BOUNDS[field] = old
        freed = ProfileSet(prof.default, {**prof.groups, group: free})
        before = cal_mod._median_abs_pct(cal.predict(prof, sub), cal.measured[sub])
        after = cal_mod._median_abs_pct(cal.predict(freed, sub), cal.measured[sub])
        print(
            f"  unbounded {field} = {getattr(free, field):.4g}; group median |error| "
            f"{before:.1f} -> {after:.1f} %"
        )


if __name__ == "__main__":
    main()
