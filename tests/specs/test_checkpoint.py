"""``estimate`` serves a model as its checkpoint ships unless told otherwise
(specs/checkpoint.py)."""

from __future__ import annotations

import json

import pytest

from infercast.cli import main
from infercast.errors import ConfigError
from infercast.estimate import estimate
from infercast.specs.catalog import load_hardware
from infercast.specs.checkpoint import checkpoint_weights, served_precision

GiB = 2**30


@pytest.mark.parametrize(
    ("model", "published_gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)]
)
def test_gpt_oss_checkpoint_size_matches_the_model_card(model, published_gib):
    # gpt-oss model card (OpenAI, arXiv:2508.10925), table 1: checkpoint size 60.8 GiB and 12.8 GiB
    # (MXFP4 routed experts with their block scales, everything else BF16)
    est = estimate(model, "h100-sxm", batches=[1])
    assert est.step_model.memory.weight_bytes / GiB == pytest.approx(published_gib, rel=0.01)
    assert est.step_model.experts is not None and est.precision.weights == "bf16"
    assert any("as the checkpoint ships them" in n for n in est.notes)


def test_expert_compute_follows_the_part():
    # Blackwell's block-scaled MMA runs MXFP4 experts with MXFP8 activations; Hopper upcasts to BF16
    assert served_precision("gpt-oss-120b", load_hardware("b200")) == ("bf16", "mxfp4/fp8")
    assert served_precision("gpt-oss-120b", load_hardware("h200-sxm")) == ("bf16", "mxfp4/bf16")
    assert served_precision("deepseek-v3", load_hardware("h200-sxm")) == ("fp8", None)
    assert served_precision("llama-3.1-8b", load_hardware("h100-sxm")) == ("bf16", None)


def test_stated_weights_and_experts_override_the_checkpoint():
    uniform = estimate("gpt-oss-120b", "h200-sxm", weights="bf16", batches=[1])
    assert uniform.step_model.experts is None
    assert uniform.step_model.memory.weight_bytes == pytest.approx(
        uniform.model.total_params * 2, rel=1e-6
    )
    w4a8 = estimate("gpt-oss-120b", "h200-sxm", batches=[1], experts="mxfp4/fp8")
    assert w4a8.step_model.experts.compute == "fp8"
    plain = estimate("gpt-oss-120b", "h200-sxm", batches=[1], experts="none")
    assert plain.step_model.experts is None
    with pytest.raises(ConfigError, match="expert precision 'int3'"):
        estimate("gpt-oss-120b", "h200-sxm", batches=[1], experts="int3")


def test_deepseek_default_is_its_fp8_checkpoint():
    assert checkpoint_weights("deepseek-v3") == "fp8"
    est = estimate("deepseek-v3", "h200-sxm", batches=[1], parallel=None)
    assert est.precision.weights == "fp8"
    # 671B parameters at one byte each
    assert est.step_model.memory.weight_bytes == pytest.approx(est.model.total_params, rel=0.01)


def test_cli_reports_the_experts_and_rejects_a_bad_spec(capsys):
    main(["estimate", "-m", "gpt-oss-120b", "-H", "b200", "--batch", "1", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert d["precision"]["experts"] == "mxfp4 experts, fp8 compute"
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "-m", "gpt-oss-120b", "--experts", "mxfp9/bf16"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "mxfp9/bf16" in err and len(err.strip().splitlines()) == 1


def _config(tmp_path, quant: dict | None, torch_dtype: str = "float16"):
    import pathlib

    base = json.loads(
        pathlib.Path(__file__)
        .parents[2]
        .joinpath("src/infercast/data/models/llama-3.1-8b.json")
        .read_text()
    )
    base["torch_dtype"] = torch_dtype
    if quant is not None:
        base["quantization_config"] = quant
    path = tmp_path / "config.json"
    path.write_text(json.dumps(base))
    return str(path)


@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4"),
        ({"quant_method": "gptq", "bits": 8}, "int8"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "int4"),
        ({"quant_method": "fbgemm_fp8"}, "fp8"),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            "int4",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "nvfp4-pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float"}}},
            },
            "fp4",
        ),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4"),
        (None, "fp16"),
    ],
)
def test_quantized_checkpoints_are_read(tmp_path, quant, expected):
    path = _config(tmp_path, quant)
    assert checkpoint_weights(path) == expected
    assert estimate(path, "h100-sxm", batches=[1]).precision.weights == expected


def test_unknown_quantization_is_an_error_naming_it(tmp_path):
    path = _config(tmp_path, {"quant_method": "hqq", "nbits": 3})
    with pytest.raises(ConfigError, match="quant_method 'hqq'.*pass --weights"):
        estimate(path, "h100-sxm", batches=[1])
    assert estimate(path, "h100-sxm", weights="int4", batches=[1]).precision.weights == "int4"
