"""Shared fixtures of validate's tests."""

from __future__ import annotations

import pytest

from infercast.validate.cases import Case


@pytest.fixture
def concurrency_row():
    """``concurrency_row(**fields) -> Case``: a fixed-concurrency TTFT row of Llama-3.1-8B on one
    H100 under vLLM 0.12 (1,024 in, 1,024 out, 16 clients), ``fields`` replacing any of it."""

    def make(**kw) -> Case:
        base = dict(
            id="R-1-ttft",
            scenario="concurrency",
            metric="ttft_mean_s",
            value=0.1,
            model="llama-3.1-8b",
            hardware="h100-sxm",
            engine="vllm-0.12.0",
            weights="bf16",
            input_tokens=1024,
            output_tokens=1024,
            concurrency=16,
        )
        return Case(**(base | kw))

    return make
