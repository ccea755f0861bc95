"""The README's and docs/accuracy.md's accuracy tables are what the default ``infercast validate``
(serving rows by simulation) scores with the shipped profile.

The simulated rows' predictions come from ``benchmarks/validate_simulated.csv`` (the whole set
takes minutes to simulate); every other row is predicted live, and a fixed sample of the file's
simulations is run again here, so the file cannot go stale silently. Regenerate file and tables
with ``python benchmarks/validate_tables.py regenerate``.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "run `python benchmarks/validate_tables.py regenerate`"
PER_SCENARIO = 8  # simulations re-run per scenario (about 30 in all)


def _tables():
    spec = importlib.util.spec_from_file_location(
        "validate_tables", ROOT / "benchmarks" / "validate_tables.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_readme_and_docs_tables_are_the_default_predictions():
    vt = _tables()
    built = vt.tables()
    for name, (path, header) in vt.TABLES.items():
        text = path.read_text()
        assert header in text.split("\n"), f"{path.name} lost its table header"
        assert "\n".join(built[name]) in text, (
            f"{path.name}'s accuracy table is not what the default predictions give: {REGENERATE}"
        )


def _sample(vt, ev) -> dict[str, list[int]]:
    """Per scenario, ``PER_SCENARIO`` simulations evenly spread over its simulations in row-id
    order, leaving out the largest tenth (by requests x output tokens) to keep the test short:
    scenario -> the row indices of the picked simulations."""
    from infercast.validate.evaluate import _task_size

    by_key: dict = defaultdict(list)
    for i in vt.simulated(ev):
        by_key[ev.plans[i].sim_key].append(i)
    per_scenario: dict = defaultdict(list)
    for rows in by_key.values():
        per_scenario[ev.cases[rows[0]].scenario].append(rows)
    out = {}
    for scenario, runs in per_scenario.items():
        sizes = sorted(_task_size(ev.plans[r[0]].simulate) for r in runs)
        cap = sizes[min(len(sizes) - 1, int(0.9 * len(sizes)))]
        small = sorted(
            (r for r in runs if _task_size(ev.plans[r[0]].simulate) <= cap),
            key=lambda r: ev.cases[r[0]].id,
        )
        step = max(1, len(small) // PER_SCENARIO)
        out[scenario] = [i for r in small[::step][:PER_SCENARIO] for i in r]
    return out


@pytest.mark.slow
def test_recorded_simulations_are_what_the_simulator_gives_now():
    from infercast.cost.profiles import load_profile_set
    from infercast.validate.cases import load_cases
    from infercast.validate.ledger import profile_matrix

    vt = _tables()
    recorded = vt.read_recorded()
    cases = load_cases()
    ev = vt.default_evaluator(cases)
    ids = {ev.cases[i].id for i in vt.simulated(ev)}
    assert ids == set(recorded), f"the file's rows are not the simulated rows: {REGENERATE}"
    sample = _sample(vt, ev)
    assert {"concurrency", "disaggregated", "server"} <= set(sample)
    picked = sorted(i for rows in sample.values() for i in rows)
    # only the picked rows' simulations run (the rest of the set is planned: speculative rows
    # pair with their acceptance rows)
    profiles = load_profile_set(None)
    profs = [profiles.for_group(g) for g in ev.groups]
    values = ev.values(profile_matrix(profs), profs, rows=picked)
    for i in picked:
        rid = ev.cases[i].id
        value, reason = recorded[rid]
        now = ev.sim_failures.get(i)
        assert now == (reason if reason and reason.startswith("simulation failed") else None), (
            f"{rid}: simulation failure now {now!r}, recorded {reason!r}: {REGENERATE}"
        )
        if value is not None:
            assert math.isclose(values[i], value, rel_tol=1e-9), (
                f"{rid}: simulated {values[i]!r} now, recorded {value!r}: {REGENERATE}"
            )


def test_tables_splice_replaces_only_the_table():
    vt = _tables()
    text = "intro\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\nafter\n"
    assert vt.splice(text, "| a | b |", ["| a | b |", "| x | y |"]) == (
        "intro\n\n| a | b |\n| x | y |\n\nafter\n"
    )
