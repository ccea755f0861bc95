"""How fast the Estimate view paints and follows a slider (issue 19's goal:
an update within 100 ms).

Starts the ``infercast ui`` app in this process (validation off: it would compete
for the two cores), opens the Estimate view in headless system Chromium (playwright),
and reads the page's own performance marks:

- first contentful paint and first chart drawn, from navigation start (ms);
- slider move -> updated chart: from the slider's ``input`` event to the redraw of
  the throughput chart with the new answer (the page's draw hook; debounce, API call
  and rendering included), over ``--moves`` keyboard steps alternating right/left;
- the part of it spent in the API round trip (``fetch`` in the page), and the API call
  alone (``/api/estimate`` from httpx), for scale.

    python benchmarks/ui_latency.py [--moves 40]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time


def _server():
    import uvicorn

    from infercast.commands.ui import free_port
    from infercast.ui.app import create_app

    port = free_port("127.0.0.1")
    srv = uvicorn.Server(
        uvicorn.Config(
            create_app(validate_on_start=False), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    threading.Thread(target=srv.run, daemon=True).start()
    while not srv.started:
        time.sleep(0.05)
    return srv, f"http://127.0.0.1:{port}"


def _summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return (
        f"{name}: n={len(xs)} median {statistics.median(xs):.1f} ms, p90 {p90:.1f} ms, "
        f"min {xs[0]:.1f} ms, max {xs[-1]:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moves", type=int, default=40)
    args = ap.parse_args()

    import httpx
    from playwright.sync_api import sync_playwright

    srv, base = _server()
    api = []
    with httpx.Client(base_url=base) as c:
        for b in (8, 16, 32, 64) * 5:
            t0 = time.perf_counter()
            c.post("/api/estimate", json={"batch": b}).raise_for_status()
            api.append(1e3 * (time.perf_counter() - t0))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/?view=estimate")
        page.wait_for_function("window.__perf && window.__perf.firstChart")
        fcp = page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
        first_chart = page.evaluate("window.__perf.firstChart")
        page.focus("#batch-slider")
        for i in range(args.moves):
            n = page.evaluate("window.__perf.updates.length")
            page.keyboard.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
            page.wait_for_function("n => window.__perf.updates.length > n", arg=n)
        updates = page.evaluate("window.__perf.updates")
        fetches = page.evaluate("window.__perf.fetch")
        browser.close()
    srv.should_exit = True
    print(
        f"first contentful paint: {fcp:.0f} ms; first chart drawn: {first_chart:.0f} ms (from "
        "navigation start)"
    )
    print(_summary("slider move -> updated chart", updates))
    print(_summary("  of which the API round trip (fetch in the page)", fetches[-len(updates) :]))
    print(_summary("POST /api/estimate alone (httpx)", api))


if __name__ == "__main__":
    main()
