"""The Estimate and Compare views in a real browser: numbers equal the Python API's, links
restore state."""

from __future__ import annotations

import pytest

from infercast.cost.profiles import resolve_profile
from infercast.estimate import estimate
from infercast.specs.parallel import Parallelism


def api_point(batch: int, hardware: str = "h100-sxm", **kw):
    """The library's answer for the view's default form at ``batch`` (as the CLI computes it)."""
    est = estimate(
        "llama-3.1-70b",
        hardware,
        kw.get("weights", "fp8"),
        kw.get("kv", "fp8"),
        None,
        [batch],
        2048,
        1024,
        Parallelism(tp=kw.get("tp", 1)),
        resolve_profile("shipped", hardware),
    )
    return est, est.to_dict()


def stat(page, name: str) -> float:
    return float(page.locator(f"#stat-{name} .value").get_attribute("data-value"))


def wait_batch(page, batch: int) -> None:
    """Until the page shows the estimate at ``batch`` (its TPOT card names it)."""
    page.wait_for_function(
        "b => (document.querySelector('#stat-tpot .sub') || {}).textContent?.includes(`batch "
        "${b},`)",
        arg=batch,
    )


def check_numbers(page, batch: int, **kw) -> dict:
    est, d = api_point(batch, **kw)
    point = d["decode"][-1]
    assert stat(page, "tpot") == pytest.approx(point["step_time_s"], rel=1e-12)
    assert stat(page, "ttft") == pytest.approx(d["prefill"]["ttft_s"], rel=1e-12)
    assert stat(page, "tps") == pytest.approx(point["tokens_per_s"], rel=1e-12)
    assert stat(page, "cost") == pytest.approx(point["cost_per_million_output_tokens"], rel=1e-12)
    assert stat(page, "mem") == pytest.approx(point["required_bytes"], rel=1e-12)
    assert stat(page, "maxb") == d["memory"]["max_batch"]
    shown_ms = page.locator("#stat-tpot .value").inner_text()
    value, unit = shown_ms.split()
    assert unit == "ms" and float(value.replace(",", "")) == pytest.approx(
        point["step_time_s"] * 1e3, abs=0.005
    )
    return d


def test_estimate_view_matches_api_follows_links_and_flags_bad_input(page, tmp_path):
    page.goto(f"{page.base}/?view=estimate&batch=16")
    wait_batch(page, 16)
    page.wait_for_function("window.__perf && window.__perf.firstChart")
    check_numbers(page, 16)
    assert page.locator("#fit").inner_text().startswith("Batch 16 at context 2048 fits")
    assert page.locator(".chart-box .uplot").count() == 4  # roofline, tok/s, TPOT, time by op kind
    page.screenshot(path=tmp_path / "estimate-batch16.png", full_page=True)

    # a value typed in the box: batch 64 does not fit on one H100; the page lists the library's
    # fixes
    page.fill("#f-batch", "64")
    wait_batch(page, 64)
    d = check_numbers(page, 64)
    assert not d["decode"][-1]["fits"]
    fixes = page.locator("#fit li").all_inner_texts()
    assert fixes == d["memory"]["suggestions"] and fixes
    assert "batch=64" in page.url

    # the slider, by keyboard: one step right of log2(64) = 6 is 2**6.25 -> 76
    page.focus("#batch-slider")
    page.keyboard.press("ArrowRight")
    wait_batch(page, 76)
    check_numbers(page, 76)
    page.wait_for_function("window.__perf.updates.length > 0")

    # another configuration by select: H200 with TP 2
    page.select_option("#f-hardware", "h200-sxm")
    page.fill("#f-tp", "2")
    page.wait_for_function(
        "() => location.search.includes('tp=2') && location.search.includes('h200')"
    )
    page.wait_for_function(
        "() => (document.querySelector('#stat-cost .sub') || {}).textContent?.includes('× 2 GPU')"
    )
    check_numbers(page, 76, hardware="h200-sxm", tp=2)
    shared = page.url
    page.screenshot(path=tmp_path / "estimate-h200-tp2.png", full_page=True)

    # the shared link opens the same state in a fresh page
    other = page.context.new_page()
    other.goto(shared)
    wait_batch(other, 76)
    assert other.input_value("#f-hardware") == "h200-sxm" and other.input_value("#f-tp") == "2"
    assert other.input_value("#f-batch") == "76"
    assert stat(other, "tpot") == stat(page, "tpot")
    other.close()

    # bad input: one clear message beside the field, the server keeps serving
    page.fill("#f-batch", "-4")
    page.wait_for_function("() => document.querySelector('#err-batch')?.textContent.length > 0")
    assert page.locator("#err-batch").inner_text() == "batch must be at least 1 (got -4)"
    page.screenshot(path=tmp_path / "estimate-bad-batch.png", full_page=True)
    page.fill("#f-batch", "8")
    wait_batch(page, 8)
    assert page.locator("#err-batch").inner_text() == ""

    page.select_option("#f-model", "custom")
    page.fill("#f-model_config_json", '{"architectures": ["LlamaForCausalLM"], broken')
    # choosing "custom" first shows the empty field's own message ("paste a Hugging Face
    # config.json ..."): wait for the broken text's answer, not for any message (a fresh-clone
    # CI run, 2026-12-05, read the first one)
    page.wait_for_function(
        "() => (document.querySelector('#err-model_config_json')?.textContent || '')"
        ".includes('config.json is not valid JSON')"
    )
    page.select_option("#f-model", "llama-3.1-8b")
    page.wait_for_function(
        "() => document.querySelector('#err-model_config_json')?.textContent === ''"
    )

    page.goto(f"{page.base}/?view=estimate&hardware=h900")
    page.wait_for_function("() => document.querySelector('#err-hardware')?.textContent.length > 0")
    assert page.locator("#err-hardware").inner_text().startswith("unknown part 'h900'")


def test_estimate_view_takes_an_uploaded_config(page):
    from infercast.specs.catalog import data_path

    path = data_path("models", "llama-3.1-8b.json")
    page.goto(f"{page.base}/?view=estimate&model=custom&weights=bf16&kv_cache=&batch=8")
    page.wait_for_function(
        "() => document.querySelector('#err-model_config_json')?.textContent.startsWith('paste')"
    )
    page.set_input_files("#f-model_config_json-file", str(path))
    wait_batch(page, 8)
    assert page.input_value("#f-model_config_json") == path.read_text()
    est = estimate(
        "llama-3.1-8b",
        "h100-sxm",
        "bf16",
        None,
        None,
        [8],
        2048,
        1024,
        Parallelism(),
        resolve_profile("shipped", "h100-sxm"),
    )
    assert stat(page, "tpot") == pytest.approx(est.decode[-1].step_time_s, rel=1e-12)
