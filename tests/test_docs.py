"""The documentation holds together: links resolve, named files exist, reference pages stay
short, and each generated "current numbers" table is what its commands print today."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "docs" / "history"
REFERENCE = sorted(p for p in (ROOT / "docs").glob("*.md"))
PAGES = [
    ROOT / "README.md",
    ROOT / "examples" / "README.md",
    *REFERENCE,
    *sorted(HISTORY.glob("*.md")),
]
MAX_REFERENCE_LINES = 275  # "about 250": a longer page splits, or its dated logs go to history

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A path in this repository named in prose: `docs/x.md`, tests/sim/test_replica.py, ...
REPO_PATH = re.compile(r"(?<![\w/.-])((?:docs|tests|benchmarks|examples|src)/[\w./*-]*[\w*])")


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_links_resolve(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: checked by nobody offline
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{_rel(page)} links to {target}, which does not exist"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{_rel(page)} links to {target}: no such heading"


@pytest.mark.parametrize("page", [ROOT / "README.md", *REFERENCE], ids=_rel)
def test_named_repository_files_exist(page):
    """Paths a reference page names exist (history pages may name what is gone).

    Under docs/, src/ and benchmarks/, a path whose folder is not in this repository belongs
    to another project a page cites (``docs/source/...`` of TensorRT-LLM) and is skipped;
    tests/ and examples/ are only ever ours."""
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for path in REPO_PATH.findall(line):
            path = path.rstrip(".")
            ours = path.startswith(("tests/", "examples/")) or (ROOT / path).parent.exists()
            if not ours:
                continue
            assert list(ROOT.glob(path)), f"{_rel(page)}:{n} names {path}, which does not exist"


@pytest.mark.parametrize("page", REFERENCE, ids=_rel)
def test_reference_pages_stay_short(page):
    lines = len(page.read_text().splitlines())
    assert lines <= MAX_REFERENCE_LINES, (
        f"{_rel(page)} has {lines} lines: split it, or move dated measurements to docs/history/"
    )


def _current_numbers():
    script = ROOT / "benchmarks" / "current_numbers.py"
    spec = importlib.util.spec_from_file_location("current_numbers", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CURRENT = _current_numbers()


@pytest.mark.parametrize("name", sorted(CURRENT.TABLES))
def test_current_numbers_are_current(name):
    assert CURRENT.committed(name) == CURRENT.generated(name), (
        f"docs/{CURRENT.TABLES[name][0]}'s {name} table is stale: "
        "run python benchmarks/current_numbers.py"
    )
