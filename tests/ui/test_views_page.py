"""Compare, Simulate, Plan and Validation in a real browser, against the Python API for the same
inputs."""

from __future__ import annotations

import json

import pytest

from infercast.cost.profiles import resolve_profile
from infercast.estimate import estimate
from infercast.specs.parallel import Parallelism


def value(page, selector: str) -> float:
    return float(page.locator(selector).get_attribute("data-value"))


def test_compare_view_puts_two_parts_side_by_side(page, tmp_path):
    page.goto(f"{page.base}/?view=compare")
    page.wait_for_function(
        "() => document.querySelectorAll('#compare-table td[data-config]').length > 0"
    )
    cells = (
        page.locator("#compare-table tbody tr").nth(1).locator("td[data-config]")
    )  # TPOT at the batch
    for i, hw in enumerate(("h100-sxm", "h200-sxm")):
        est = estimate(
            "llama-3.1-70b",
            hw,
            "fp8",
            "fp8",
            None,
            [32],
            2048,
            1024,
            Parallelism(),
            resolve_profile("shipped", hw),
        )
        assert float(cells.nth(i).get_attribute("data-value")) == pytest.approx(
            est.decode[-1].step_time_s, rel=1e-12
        )
    words = page.locator("#differences").inner_text()
    assert words.startswith("B vs A (hardware h100-sxm -> h200-sxm): TPOT at batch 32")
    assert page.locator(".chart-box .uplot").count() == 3
    page.screenshot(path=tmp_path / "compare-h100-h200.png", full_page=True)

    # a preset pair, then the link round trip
    page.get_by_role("button", name="TP1 vs TP2").click()
    page.wait_for_function(
        "() => document.querySelector('#differences')?.textContent.includes('tp 1 -> 2')"
    )
    other = page.context.new_page()
    other.goto(page.url)
    other.wait_for_function(
        "() => document.querySelector('#differences')?.textContent.includes('tp 1 -> 2')"
    )
    assert other.input_value("#f-c1-tp") == "2"
    other.close()

    # a bad value in one card is flagged in that card
    page.fill("#f-c1-tp", "0")
    page.wait_for_function("() => document.querySelector('#err-c1-tp')?.textContent.length > 0")
    assert "tp must be at least 1" in page.locator("#err-c1-tp").inner_text()


SIM_URL = "/?view=simulate&num_requests=120&rate=20&lengths=trace"


def test_simulate_view_runs_in_the_background_and_matches_simulate(page, tmp_path):
    from infercast.ui.simulate_view import SimulateForm, prepare, run

    page.goto(page.base + SIM_URL)
    page.wait_for_function(
        "() => (document.querySelector('#status') || {}).textContent?.startsWith('done')",
        timeout=60_000,
    )
    form = SimulateForm(num_requests=120, rate=20, lengths="trace")
    cfg, timer = prepare(form)
    want = run(form, cfg, timer, lambda _: None)["result"]
    assert value(page, "#stat-tps .value") == pytest.approx(
        want["output_throughput_tokens_per_s"], rel=1e-9
    )
    assert value(page, "#stat-ttft .value") == pytest.approx(want["ttft_s"]["p99"], rel=1e-9)
    assert value(page, "#stat-goodput .value") == pytest.approx(want["goodput_per_s"], rel=1e-9)
    assert value(page, "#stat-done .value") == want["num_completed"] == 120
    assert "--trace azure-conv" in page.locator(".export .cmd").inner_text()
    assert page.locator(".chart-box .uplot").count() == 5  # three CDFs and two timelines drawn
    page.screenshot(path=tmp_path / "simulate-trace.png", full_page=True)

    # another scheduler, run again from the page: the numbers follow
    page.select_option("#f-scheduler", "static")
    page.click("#run")
    page.wait_for_function(
        "() => location.search.includes('scheduler=static') && "
        "document.querySelector('#status')?.textContent.startsWith('done') && "
        "!document.querySelector('#run').disabled",
        timeout=60_000,
    )
    form = SimulateForm(num_requests=120, rate=20, lengths="trace", scheduler="static")
    cfg, timer = prepare(form)
    static = run(form, cfg, timer, lambda _: None)["result"]
    assert static["output_throughput_tokens_per_s"] != want["output_throughput_tokens_per_s"]
    page.wait_for_function(
        "v => document.querySelector('#stat-tps .value').dataset.value == String(v)",
        arg=static["output_throughput_tokens_per_s"],
    )

    # bad input is caught before the job starts, beside its field
    page.fill("#f-rate", "-3")
    page.click("#run")
    page.wait_for_function("() => document.querySelector('#err-rate')?.textContent.length > 0")
    assert page.locator("#err-rate").inner_text() == "rate must be more than 0 (got -3)"


def test_plan_view_finds_the_cheapest_and_says_why_the_runner_up_lost(page, tmp_path):
    from infercast.ui.plan_view import PlanForm, build_request, run

    q = dict(hardware="h100-sxm", tp="1", precision="fp8/fp8", num_requests=30)
    page.goto(page.base + "/?view=plan&" + "&".join(f"{k}={v}" for k, v in q.items()))
    page.wait_for_function(
        "() => (document.querySelector('#status') || {}).textContent?.startsWith('done')",
        timeout=90_000,
    )
    form = PlanForm(**q)
    want = run(form, build_request(form), lambda _: None)["result"]
    assert page.locator("#best-label").inner_text() == want["best"]["label"]
    first = page.locator("#options tbody tr").first.locator("td[data-value]")
    assert float(first.get_attribute("data-value")) == pytest.approx(
        want["best"]["cost_per_million_output_tokens"]
    )
    assert want["alternatives"][0]["why_not"] in page.locator("#best").inner_text()
    assert page.locator(".chart-box .uplot").count() == 2  # Pareto, cost vs latency
    page.screenshot(path=tmp_path / "plan.png", full_page=True)

    page.fill("#f-hardware", "h100-sxm,h900")
    page.click("#run")
    page.wait_for_function("() => document.querySelector('#err-hardware')?.textContent.length > 0")
    assert page.locator("#err-hardware").inner_text().startswith("unknown part h900")


def test_validation_view_filters_and_opens_a_row(page, tmp_path, validation_csv):
    from infercast.ui.validation_view import compute

    report, details = compute(str(validation_csv))
    page.goto(f"{page.base}/?view=validation")
    page.wait_for_selector("#filter-scenario", timeout=60_000)
    page.select_option("#filter-scenario", "offline")
    offline = [r for r in report["rows"] if r["scenario"] == "offline"]
    assert page.locator("#summary").inner_text().startswith(f"{len(offline)} rows shown")
    worst = max(
        (r for r in offline if r["predicted"] is not None), key=lambda r: r["abs_error_pct"]
    )
    row = page.locator("#vrows tbody tr").first
    assert row.get_attribute("data-id") == worst["id"]
    row.focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        "id => document.querySelector('#detail h3')?.textContent.startsWith(id)", arg=worst["id"]
    )
    text = page.locator("#detail").inner_text()
    assert details[worst["id"]]["row"]["citation"] in text
    assert "how it was predicted" in text
    assert f"row={worst['id']}" in page.url
    page.screenshot(path=tmp_path / "validation-row.png", full_page=True)

    # the link opens the same filter and row; a click on a point opens that point's row
    other = page.context.new_page()
    other.goto(page.url)
    other.wait_for_function(
        "id => document.querySelector('#detail h3')?.textContent.startsWith(id)", arg=worst["id"]
    )
    assert other.input_value("#filter-scenario") == "offline"
    far = max((r for r in offline if r["predicted"] is not None), key=lambda r: r["measured"])
    assert far["id"] != worst["id"]
    xy = other.evaluate(
        """([m, p]) => { const u = document.querySelector('#vchart .chart-box').uplot;
        const b = u.over.getBoundingClientRect();
        return [b.left + u.valToPos(m, 'x'), b.top + u.valToPos(p, 'y')]; }""",
        [far["measured"], far["predicted"]],
    )
    other.mouse.click(*xy)
    other.wait_for_function(
        "id => document.querySelector('#detail h3')?.textContent.startsWith(id)", arg=far["id"]
    )
    other.close()
    assert json.dumps(
        details[worst["id"]]["breakdown"]
    )  # the breakdown the page showed is plain JSON


def test_server_answers_bad_requests_with_json_and_keeps_serving(server):
    import httpx

    with httpx.Client(base_url=server, timeout=30) as c:
        bad = c.post("/api/estimate", content=b"{not json")
        assert bad.status_code == 400 and bad.json() == {
            "error": "the request body is not valid JSON",
            "field": None,
        }
        assert c.post("/api/estimate", json={"batch": -4}).json()["field"] == "batch"
        assert c.post("/api/estimate", json={"hardware": "h900"}).json()["field"] == "hardware"
        assert c.get("/api/jobs/nope").status_code == 404
        assert c.post("/api/estimate", json={}).status_code == 200
        assert "Traceback" not in c.post("/api/compare", json={"configs": [{}]}).text
