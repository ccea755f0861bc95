"""The README's accuracy table is what the shipped profile scores today with ``validate --fast``
(the closed forms for concurrency and disaggregated rows: the simulated default takes minutes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from infercast.cost.profiles import load_profile_set
from infercast.validate.cases import load_cases
from infercast.validate.evaluate import Evaluator
from infercast.validate.score import report

ROOT = Path(__file__).resolve().parents[2]


def _tables():
    spec = importlib.util.spec_from_file_location(
        "validate_tables", ROOT / "benchmarks" / "validate_tables.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_readme_accuracy_table_is_the_default_profiles():
    # as `infercast validate --fast --json` with no --profile: the default every command uses
    preds = Evaluator(load_cases(), assume_weights="checkpoint").predict(load_profile_set(None))
    rows = report(preds, "shipped")["rows"]
    table = _tables().readme_table(rows)
    readme = (ROOT / "README.md").read_text()
    assert "\n".join(table) in readme, (
        "README.md's accuracy table is stale: regenerate it with "
        "`infercast validate --fast --json | python benchmarks/validate_tables.py readme`"
    )
