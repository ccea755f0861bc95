"""The command line each view shows prints the numbers the view shows."""

from __future__ import annotations

import json
import shlex

import pytest

from infercast.cli import main


def _run(command: str, capsys) -> dict:
    args = shlex.split(command)
    assert args[0] == "infercast"
    capsys.readouterr()
    main(args[1:])
    return json.loads(capsys.readouterr().out)


def test_estimate_command_prints_the_views_json(capsys):
    from infercast.ui.estimate_view import estimate_payload
    from infercast.ui.inputs import EstimateForm

    form = EstimateForm(
        model="llama-3.1-8b",
        hardware="h200-sxm",
        weights="int4",
        kv_cache="",
        tp=2,
        batch=48,
        prompt=512,
        context=4096,
        price=3.5,
    )
    page = estimate_payload(form)
    cli = _run(page["command"], capsys)
    cli.pop("meta")  # the command's own record (command line, version, date)
    assert cli == json.loads(json.dumps(page["result"]))


def test_simulate_command_prints_the_views_numbers(capsys):
    from infercast.ui.simulate_view import SimulateForm, prepare, run

    form = SimulateForm(
        num_requests=150,
        rate=15,
        prefix_caching=True,
        prefix_groups=4,
        prefix_tokens=512,
        max_num_seqs=64,
        slo_tpot_s=0.02,
    )
    cfg, timer = prepare(form)
    page = run(form, cfg, timer, lambda _: None)
    cli = _run(page["command"], capsys)
    for key in (
        "output_throughput_tokens_per_s",
        "goodput_per_s",
        "mean_batch_size",
        "num_completed",
    ):
        assert cli[key] == pytest.approx(page["result"][key], rel=1e-12), key
    assert cli["ttft_s"]["p99"] == pytest.approx(page["result"]["ttft_s"]["p99"], rel=1e-12)


def test_estimate_with_an_engine_preset_prints_the_views_json(capsys):
    """An engine preset sets the profile group and the memory rule, on the page as on the CLI."""
    from infercast.ui.estimate_view import estimate_payload
    from infercast.ui.inputs import EstimateForm

    form = EstimateForm(
        model="llama-3.1-8b",
        hardware="h100-sxm",
        weights="fp8",
        tp=1,
        batch=64,
        prompt=1024,
        context=2048,
        engine="vllm-0.12",
        profile="shipped",
    )
    page = estimate_payload(form)
    cli = _run(page["command"], capsys)
    cli.pop("meta")
    assert "--engine" in page["command"] and cli == json.loads(json.dumps(page["result"]))
