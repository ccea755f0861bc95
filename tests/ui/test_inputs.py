"""The page's forms: each bad value raises FieldError naming its field, in a person's words."""

from __future__ import annotations

import pytest

from infercast.ui.estimate_view import batch_grid, build_estimate, command_line, estimate_payload
from infercast.ui.inputs import EstimateForm, FieldError


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"batch": -4}, "batch", "batch must be at least 1 (got -4)"),
        ({"tp": 1.5}, "tp", "tp must be a whole number (got 1.5)"),
        ({"prompt": "x"}, "prompt", "prompt must be a whole number (got 'x')"),
        ({"price": -1}, "price", "price must be at least 0 (got -1)"),
    ],
)
def test_form_values_are_checked_with_the_field_named(body, field, message):
    with pytest.raises(FieldError) as exc:
        EstimateForm.parse(body)
    assert exc.value.field == field and str(exc.value) == message


@pytest.mark.parametrize(
    ("body", "field", "start"),
    [
        ({"hardware": "h100-sxmm"}, "hardware", "unknown part 'h100-sxmm' (did you mean h100-sxm"),
        ({"model": "llama-9"}, "model", "unknown model 'llama-9'"),
        (
            {"model": "/etc/passwd"},
            "model",
            "unknown model '/etc/passwd'",
        ),  # no paths on the server's disk
        (
            {"model": "custom", "model_config_json": "[1]"},
            "model_config_json",
            "config.json must be a JSON object",
        ),
        ({"model": "custom", "model_config_json": "{}"}, "model_config_json", "config.json: "),
        ({"hardware": "custom", "hardware_spec": "name = 'x'"}, "hardware_spec", ""),
        ({"weights": "fp7"}, "weights", "unknown weights dtype 'fp7'"),
        ({"ep": 4}, "ep", "ep 4 exceeds the GPUs of a replica"),  # the page names fields
        ({"engine": "vllm-9"}, "engine", ""),
    ],
)
def test_specs_that_do_not_load_point_at_their_field(body, field, start):
    with pytest.raises(FieldError) as exc:
        build_estimate(EstimateForm.parse(body))
    assert exc.value.field == field and str(exc.value).startswith(start)


def test_a_pasted_part_is_read_as_the_cli_reads_a_part_file():
    spec = (
        'name = "half an H100"\nmemory_bytes = 40e9\nmemory_bandwidth_bytes_per_s = 1.675e12\n'
        "[flops_per_s]\nbf16 = 494.5e12\nfp8 = 989e12\n"
    )
    est = build_estimate(
        EstimateForm.parse(
            {
                "hardware": "custom",
                "hardware_spec": spec,
                "model": "llama-3.1-8b",
                "weights": "fp8",
                "batch": 8,
            }
        )
    )
    assert est.hardware.memory_bandwidth_bytes_per_s == 1.675e12
    assert (
        command_line(EstimateForm(hardware="custom"))
        .split("--hardware ")[1]
        .startswith("my-part.toml")
    )


def test_the_payload_is_the_cli_json_plus_a_curve_past_the_memory_wall():
    p = estimate_payload(EstimateForm(batch=16))
    assert p["result"]["decode"][-1]["batch"] == 16
    mb = p["result"]["memory"]["max_batch"]
    batches = [c["batch"] for c in p["curve"]]
    assert batches == batch_grid(mb, 16) and mb in batches and max(batches) >= 4 * mb
    assert {c["regime"] for c in p["curve"]} == {
        "weights",
        "KV",
    }  # 70B FP8 on one H100: weights, then KV
    assert p["command"].endswith("--batch 16 --profile shipped --json")
