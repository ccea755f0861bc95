"""plan tries the model as its checkpoint ships (gpt-oss: MXFP4 experts) unless that repeats
another pair."""

from __future__ import annotations

import json

from infercast.cli import main
from infercast.commands.plan import _pairs, _precisions

DEFAULT = _pairs("checkpoint/bf16,bf16/bf16,fp8/bf16,fp8/fp8", "--precision", "/")


def test_checkpoint_pair_only_where_it_is_new():
    assert ("checkpoint", "bf16") in _precisions("gpt-oss-120b", DEFAULT)
    assert ("checkpoint", "bf16") not in _precisions(
        "llama-3.1-8b", DEFAULT
    )  # a BF16 checkpoint: bf16/bf16
    assert ("checkpoint", "bf16") not in _precisions(
        "deepseek-v3", DEFAULT
    )  # an FP8 checkpoint: fp8/bf16
    assert len(_precisions("llama-3.1-8b", DEFAULT)) == 3


def test_gpt_oss_fits_one_h200_only_as_shipped(capsys):
    main(
        [
            "plan",
            "--model",
            "gpt-oss-120b",
            "--hardware",
            "h200-sxm",
            "--rate",
            "2",
            "--input-tokens",
            "512",
            "--output-tokens",
            "64",
            "--slo-ttft-p99",
            "2.0",
            "--slo-tpot-p99",
            "0.05",
            "--tp",
            "1",
            "--precision",
            "checkpoint/bf16,bf16/bf16",
            "--batch-caps",
            "256",
            "--chunks",
            "8192",
            "--no-speculative",
            "--disagg-ratios",
            "none",
            "--num-requests",
            "30",
            "--executor",
            "serial",
            "--json",
        ]
    )
    d = json.loads(capsys.readouterr().out)
    assert (
        d["best"]["weights"] == "checkpoint"
        and d["best"]["num_gpus"] == 1
        and d["best"]["meets_slo"]
    )
