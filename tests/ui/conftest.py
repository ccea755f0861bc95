"""Fixtures for the page's tests: a live ``infercast ui`` server and a real headless Chromium.

The browser is the system's Chromium (Debian package ``chromium``) driven by the
``playwright`` package (its own browser download is never used). Without them the
browser tests skip with the reason; with ``INFERCAST_REQUIRE_BROWSER=1`` (set by
.ci/run) they fail instead, so CI cannot skip them silently.
"""

from __future__ import annotations

import csv
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")
VALIDATION_ROWS = 40  # a slice of the shipped measurements: the view's full run takes a minute


def _missing(reason: str):
    if os.environ.get("INFERCAST_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (INFERCAST_REQUIRE_BROWSER=1: browser tests must run)")
    pytest.skip(reason)


def chromium_path() -> str | None:
    """The system Chromium, if installed."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def validation_csv(tmp_path_factory) -> Path:
    """The first rows of the shipped measurements (every scenario kept), as a CSV."""
    from infercast.specs.catalog import data_path

    with data_path("measurements.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows, seen = [], {}
        for r in reader:  # a few rows of each scenario, so the filters have something to filter
            if seen.get(r["scenario"], 0) < VALIDATION_ROWS // 8:
                seen[r["scenario"]] = seen.get(r["scenario"], 0) + 1
                rows.append(r)
        fields = reader.fieldnames
    out = tmp_path_factory.mktemp("validation") / "measurements.csv"
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return out


@pytest.fixture(scope="session")
def server(validation_csv):
    """A live server on a free loopback port: yields its base URL."""
    import uvicorn

    from infercast.commands.ui import free_port
    from infercast.ui.app import create_app

    port = free_port("127.0.0.1")
    srv = uvicorn.Server(
        uvicorn.Config(
            create_app(validation_data=str(validation_csv)),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        if time.monotonic() > deadline:
            pytest.fail("the ui server did not start within 20 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser():
    """Headless system Chromium through playwright (skips, or fails under CI, when absent)."""
    path = chromium_path()
    if path is None:
        _missing("Chromium is not installed (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    """A fresh laptop-width page; fails the test on any script error or console error."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    # a 400 answer to a bad input is expected (the page shows its message); anything else is not
    pg.on(
        "console",
        lambda m: (
            errors.append(f"console: {m.text}")
            if m.type == "error" and "status of 400" not in m.text
            else None
        ),
    )
    pg.base = server
    yield pg
    ctx.close()
    assert not errors, errors
