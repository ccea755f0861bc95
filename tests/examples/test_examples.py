"""The claims gallery: every example reproduces its saved output, and docs/claims.md is current.

Numbers are compared with a relative tolerance of 0.1 % (``RTOL``): the
estimator is closed-form and the simulations are seeded, so a difference
beyond float noise means the cost model or simulator changed; then rerun
``python examples/make_claims_table.py --refresh`` and read the diff (the
verdicts in docs/claims.md may move). Strings, booleans, keys and the verdict
word must match exactly.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RTOL = 1e-3
ATOL = 1e-12
REFRESH = "python examples/make_claims_table.py --refresh"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "make_claims_table", ROOT / "examples" / "make_claims_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
PATHS = GEN.example_paths()


def assert_close(live, saved, where: str = "result", values: bool = True) -> None:
    """Same structure; numbers within RTOL; everything else equal (``values=False``: structure
    only)."""
    if isinstance(saved, dict):
        assert isinstance(live, dict) and set(live) == set(saved), (
            f"{where}: keys {sorted(live)} vs {sorted(saved)}"
        )
        for k in saved:
            assert_close(live[k], saved[k], f"{where}.{k}", values)
    elif isinstance(saved, list):
        assert isinstance(live, list) and len(live) == len(saved), f"{where}: length differs"
        for i, (a, b) in enumerate(zip(live, saved, strict=True)):
            assert_close(a, b, f"{where}[{i}]", values)
    elif not values:
        return
    elif isinstance(saved, bool) or saved is None or isinstance(saved, str):
        assert live == saved, f"{where}: {live!r} vs saved {saved!r}"
    else:
        assert isinstance(live, int | float) and not isinstance(live, bool), (
            f"{where}: {live!r} is not a number"
        )
        assert math.isclose(live, saved, rel_tol=RTOL, abs_tol=ATOL), (
            f"{where}: {live!r} vs saved {saved!r} (rtol {RTOL}); if the model changed on purpose: "
            f"{REFRESH}"
        )


def test_gallery_numbers_its_claims_one_to_n():
    ids = sorted(GEN.load_example(p).CLAIM["id"] for p in PATHS)
    assert ids == list(range(1, len(PATHS) + 1)) and len(ids) >= 12


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_example_reproduces_its_saved_output(path):
    module = GEN.load_example(path)
    saved = json.loads(GEN.expected_path(path).read_text())
    if module.CLAIM.get("measured"):
        # Measured on the machine running the test: the same numbers cannot come back. Check
        # the example runs, returns the saved structure, and computes its verdict from them.
        missing = [m for m in module.NEEDS if importlib.util.find_spec(m) is None]
        if missing:
            pytest.skip(f"{path.stem} measures with {', '.join(missing)} installed")
        live = GEN.output_of(module, module.run())
        assert live["claim"] == saved["claim"]
        assert_close(live["result"], saved["result"], values=False)
        assert live["verdict"] in ("reproduced", "holds only under stated conditions", "refuted")
        assert module.verdict(live["result"]) == (live["verdict"], live["finding"])
        return
    live = GEN.output_of(module, module.run())
    assert live["verdict"] in ("reproduced", "holds only under stated conditions", "refuted")
    assert live["claim"] == saved["claim"]
    assert_close(live["result"], saved["result"])
    assert live["verdict"] == saved["verdict"], (
        f"verdict moved: {saved['verdict']!r} -> {live['verdict']!r}"
    )


def test_assert_close_catches_a_drifted_number():
    assert_close({"a": [1.0, "x"]}, {"a": [1.0 + 1e-6, "x"]})
    with pytest.raises(AssertionError):
        assert_close({"a": [1.01, "x"]}, {"a": [1.0, "x"]})
    with pytest.raises(AssertionError):
        assert_close({"a": 1.0, "b": 2}, {"a": 1.0})


def test_claims_page_is_generated_from_the_saved_outputs():
    doc = ROOT / "docs" / "claims.md"
    assert doc.read_text() == GEN.render(), (
        "docs/claims.md is stale: run python examples/make_claims_table.py"
    )
    rows = [
        line for line in doc.read_text().splitlines() if line[:2] == "| " and line[2:3].isdigit()
    ]
    assert len(rows) == len(PATHS)
