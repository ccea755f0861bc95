"""The simulator's results do not drift: small runs of every main path against a saved fingerprint.

``tests/sim/fingerprint_quick.json`` was written by ``benchmarks/sim_fingerprint.py --quick``
on the code before the step lifecycle was unified (commit 4edeabe). A change that moves any
result more than 1e-9 relative (or any count at all) fails here; when a change means to alter
results, regenerate the file with that command and say why in the commit.
"""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAVED = Path(__file__).with_name("fingerprint_quick.json")


def _fingerprint_module():
    path = ROOT / "benchmarks" / "sim_fingerprint.py"
    spec = importlib.util.spec_from_file_location("sim_fingerprint", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_cases_match_the_saved_fingerprint_within_1e_9():
    fp = _fingerprint_module()
    saved = json.loads(SAVED.read_text())
    cases = fp.quick_cases()
    assert sorted(saved) == sorted(cases)
    got = fp.run_cases(sorted(cases), cases, series_digest=True)
    for name, d in got.items():  # fields added to the output since the file was saved are not drift
        for key in set(d) - set(saved[name]):
            del d[key]
    worst = [0.0, ""]
    bad = fp.compare(saved, got, 1e-9, 1e-12, "", worst)
    assert bad is None, f"results drifted at {bad} (largest relative difference {worst[0]:.3g})"


def test_the_comparison_catches_a_drift_beyond_the_tolerance():
    fp = _fingerprint_module()
    a = {"x": {"t": [1.0, 2.0], "n": 3, "_records": [5, "h1"]}}
    near = {"x": {"t": [1.0, 2.0 * (1 + 1e-10)], "n": 3, "_records": [5, "h2"]}}
    assert fp.compare(a, near, 1e-9, 0.0) is None  # the records' hash may differ, their count not
    assert fp.compare(
        a, {"x": {"t": [1.0, 2.0 * (1 + 1e-8)], "n": 3, "_records": [5, "h1"]}}, 1e-9, 0.0
    )
    assert fp.compare(a, {"x": {"t": [1.0, 2.0], "n": 4, "_records": [5, "h1"]}}, 1e-9, 0.0)
    assert fp.compare(a, {"x": {"t": [1.0, 2.0], "n": 3, "_records": [6, "h1"]}}, 1e-9, 0.0)
