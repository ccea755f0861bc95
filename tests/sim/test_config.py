"""The simulator's config serves a model as its checkpoint ships unless told otherwise."""

from __future__ import annotations

import pytest

from infercast.errors import ConfigError, DoesNotFitError
from infercast.sim.config import build_config
from infercast.sim.presets import build_step_model


def test_default_weights_are_the_checkpoints():
    assert (
        build_config({}).weights == "bf16" and build_config({}).experts is None
    )  # llama-3.1-8b: bfloat16
    ds = build_config({"model": "deepseek-v3", "hardware": "h200-sxm", "tp": 8})
    assert (ds.weights, ds.experts) == ("fp8", None)
    oss = build_config({"model": "gpt-oss-120b", "hardware": "b200"})
    assert (oss.weights, oss.experts) == ("bf16", "mxfp4/fp8")
    assert build_config({"model": "gpt-oss-120b", "hardware": "h200-sxm"}).experts == "mxfp4/bf16"


def test_stated_weights_and_experts_win():
    cfg = build_config({"model": "gpt-oss-120b", "hardware": "h200-sxm", "weights": "fp8"})
    assert (cfg.weights, cfg.experts) == ("fp8", None)  # a stated dtype quantizes the whole model
    cfg = build_config({"model": "gpt-oss-120b", "hardware": "h200-sxm", "experts": "none"})
    assert (cfg.weights, cfg.experts) == ("bf16", None)
    with pytest.raises(ConfigError, match="config field experts: expert precision 'mxfp9/bf16'"):
        build_config({"model": "gpt-oss-120b", "experts": "mxfp9/bf16"})


def test_stated_compute_dtype_reaches_the_step_model():
    """``compute`` sets the matmuls' dtype (infercast's CPU engine: fp32 in every format);
    unset, int4 weights compute in bf16 and the step is faster at a bf16 peak above fp32's."""
    base = {"weights": "int4", "kv_cache": "fp32", "hardware": "h100-sxm"}
    default = build_step_model(build_config(base))
    fp32 = build_step_model(build_config({**base, "compute": "fp32"}))
    assert default.precision.compute == "bf16" and fp32.precision.compute == "fp32"
    assert fp32.precision.weights == "int4"
    assert fp32.step_time_s([2048], [0]) > 2 * default.step_time_s([2048], [0])


def test_mxfp4_checkpoint_fits_where_bf16_does_not():
    # 60.7 GiB of MXFP4 experts + BF16 rest leave most of an H200 to the KV cache; all-BF16 (234 GB)
    # fits nowhere
    sm = build_step_model(build_config({"model": "gpt-oss-120b", "hardware": "h200-sxm"}))
    assert sm.experts is not None and sm.kv_capacity_tokens > 500_000
    with pytest.raises(DoesNotFitError, match="leaves no memory for the KV cache"):
        build_step_model(
            build_config({"model": "gpt-oss-120b", "hardware": "h200-sxm", "experts": "none"})
        )
