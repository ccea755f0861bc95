"""One real cost model shared by the lever tests (Llama-3.1-8B on an H100 SXM, bf16)."""

from __future__ import annotations

import pytest

from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision


@pytest.fixture(scope="session")
def step_model() -> StepModel:
    return StepModel(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision.parse("bf16"))
