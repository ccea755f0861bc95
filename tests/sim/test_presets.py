"""``simulate --engine``: the same closed-loop workload under vLLM 0.12 and SGLang gives different,
explained TTFT distributions (scheduling alone: both timed with the built-in profile)."""

from __future__ import annotations

import json

import pytest

from infercast.cli import main

RUN = [
    "simulate",
    "--profile",
    "builtin",
    "--concurrency",
    "64",
    "--num-requests",
    "256",
    "--input-tokens",
    "2048",
    "--output-tokens",
    "128",
    "--no-progress",
    "--json",
]


def _run(engine: str, capsys) -> dict:
    main(RUN + ["--engine", engine])
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_vllm_and_sglang_ttft_distributions_differ_as_their_schedulers_do(capsys):
    v, s = _run("vllm-0.12", capsys), _run("sglang", capsys)
    assert (v["scheduler"], s["scheduler"]) == ("chunked", "prefill-first")
    # vLLM V1 puts a new prompt's chunk into the next step beside the running decodes: once the
    # first wave has passed the clients are out of step and most prompts wait about one step
    # (median TTFT well under a second), but every decode pays for the chunks riding with it
    # (ITL p99 = a step carrying an 8192-token chunk, ~10x a plain decode step).
    # SGLang runs a prefill batch whenever one can be formed and pauses the decodes meanwhile: the
    # 64 clients stay in lockstep, each wave's 64 x 2048 prompt tokens go through 16 prefill-only
    # steps, so TTFT spreads evenly over them (median ~ mean ~ 8 steps) while decode steps stay
    # plain (low ITL p99, lower TPOT).
    assert v["ttft_s"]["p50"] < 0.5 * s["ttft_s"]["p50"]
    assert s["ttft_s"]["p50"] == pytest.approx(s["ttft_s"]["mean"], rel=0.1)
    assert (
        v["ttft_s"]["p50"] < 0.5 * v["ttft_s"]["mean"]
    )  # vLLM: a long tail (the first, lockstep wave)
    assert s["itl_s"]["p99"] < 0.2 * v["itl_s"]["p99"]
    assert s["tpot_s"]["mean"] < v["tpot_s"]["mean"]


def test_engine_preset_sets_the_scheduler_under_explicit_flags(capsys):
    main(
        [
            "simulate",
            "--engine",
            "vllm-0.6",
            "--rate",
            "2",
            "--num-requests",
            "20",
            "--no-progress",
            "--json",
        ]
    )
    assert json.loads(capsys.readouterr().out)["scheduler"] == "continuous"
    main(
        [
            "simulate",
            "--engine",
            "vllm-0.6",
            "--scheduler",
            "chunked",
            "--rate",
            "2",
            "--num-requests",
            "20",
            "--no-progress",
            "--json",
        ]
    )
    assert (
        json.loads(capsys.readouterr().out)["scheduler"] == "chunked"
    )  # a flag wins over the preset


def test_with_profile_compute_fills_only_an_unset_compute(tmp_path):
    from infercast.sim.presets import with_profile_compute

    prof = tmp_path / "p.toml"
    prof.write_text('[profile]\ncompute = "fp32"\n')
    assert with_profile_compute({"weights": "int4"}, str(prof))["compute"] == "fp32"
    assert with_profile_compute({"compute": None}, str(prof))["compute"] == "fp32"
    assert with_profile_compute({"compute": "bf16"}, str(prof))["compute"] == "bf16"
    assert "compute" not in with_profile_compute({"weights": "int4"}, None)
    assert "compute" not in with_profile_compute({"weights": "int4"}, "builtin")


def test_with_profile_compute_fills_the_heads_format_from_the_profile(tmp_path):
    """``infercast machine --weights auto`` records SmolLM2's int8 head; a simulation with that
    profile prices the head there unless its config names one."""
    from infercast.sim.presets import with_profile_compute

    prof = tmp_path / "p.toml"
    prof.write_text('[profile]\ncompute = "fp32"\nhead_weights = "int8"\n')
    assert with_profile_compute({"weights": "int4"}, str(prof))["head_weights"] == "int8"
    named = with_profile_compute({"weights": "int4", "head_weights": "int4"}, str(prof))
    assert named["head_weights"] == "int4"
    plain = tmp_path / "q.toml"
    plain.write_text('[profile]\ncompute = "fp32"\n')
    assert "head_weights" not in with_profile_compute({"weights": "int4"}, str(plain))
