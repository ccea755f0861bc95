"""``infercast ui``: loopback by default on a free port, a warning for any other address."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    """Start ``infercast ui`` and read the address it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "infercast.cli", "ui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("infercast ui: serving on http://"), line
    return proc, line.split("serving on ")[1].split()[0]


def _wait_ok(url: str) -> httpx.Response:
    deadline = time.monotonic() + 20
    while True:
        try:
            return httpx.get(url + "api/options", timeout=5)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_ui_binds_loopback_on_a_free_port_and_serves_the_page():
    proc, url = _start()
    try:
        assert url.startswith("http://127.0.0.1:")
        assert "llama-3.1-70b" in _wait_ok(url).json()["models"]
        page = httpx.get(url, timeout=5).text
        assert "/static/vendor/uPlot.iife.min.js" in page
        assert "://" not in page.split("<body>")[0]  # every asset is local: no CDN
        assert httpx.get(url + "static/vendor/uPlot.iife.min.js", timeout=5).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_ui_warns_when_bound_beyond_loopback():
    from infercast.commands.ui import free_port

    port = free_port("0.0.0.0")
    proc, url = _start("--host", "0.0.0.0", "--port", str(port))
    try:
        assert url == f"http://0.0.0.0:{port}/"
        _wait_ok(f"http://127.0.0.1:{port}/")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "warning: serving on 0.0.0.0, reachable from other machines" in err


def test_ui_rejects_a_bad_port():
    out = subprocess.run(
        [sys.executable, "-m", "infercast.cli", "ui", "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "infercast: error: --port must be 1..65535, got 70000"
