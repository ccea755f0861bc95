"""One vocabulary across commands: vLLM ``bench serve``'s flag names and units (milliseconds for
SLOs), the old names kept as hidden aliases, ``--version``, and the ``meta`` every JSON result
carries."""

from __future__ import annotations

import json

import pytest

from infercast import __version__
from infercast.cli import build_app, main

SIM = [
    "simulate",
    "--model",
    "llama-3.1-8b",
    "--hardware",
    "h100-sxm",
    "--input-tokens",
    "256",
    "--output-tokens",
    "32",
    "--seed",
    "1",
    "--no-progress",
    "--json",
]


def _sim(capsys, *args: str) -> dict:
    main([*SIM, *args])
    return json.loads(capsys.readouterr().out)


def test_version(capsys):
    main(["--version"])  # prints and stops before the default seed analysis
    assert capsys.readouterr().out.strip() == f"infercast {__version__}"


def test_new_and_old_simulate_flags_give_the_same_run(capsys):
    new = _sim(
        capsys,
        "--request-rate",
        "4",
        "--num-prompts",
        "40",
        "--slo-ttft-ms",
        "200",
        "--slo-tpot-ms",
        "20",
    )
    old = _sim(
        capsys, "--rate", "4", "--num-requests", "40", "--slo-ttft-s", "0.2", "--slo-tpot-s", "0.02"
    )
    drop = ("meta", "sim_wall_s", "sim_cpu_s", "wall_s", "cpu_s", "requests_per_cpu_s")
    assert {k: v for k, v in new.items() if k not in drop} == {
        k: v for k, v in old.items() if k not in drop
    }
    assert new["num_requests"] == 40 and new["goodput_per_s"] is not None


def test_old_and_new_name_disagreeing_is_an_error(capsys):
    with pytest.raises(SystemExit) as done:
        main([*SIM, "--request-rate", "4", "--rate", "5"])
    assert (
        done.value.code == 2
        and "--rate is the old name of --request-rate" in capsys.readouterr().err
    )


def test_help_shows_only_the_new_names():
    from typer.testing import CliRunner

    for cmd, new, old in (
        ("simulate", "--request-rate", "--rate "),
        ("simulate", "--slo-ttft-ms", "--slo-ttft-s "),
        ("bench", "--max-concurrency", "--concurrency "),
        ("plan", "--slo-ttft-ms", "--slo-ttft-p99"),
    ):
        out = CliRunner().invoke(build_app(), [cmd, "--help"], env={"COLUMNS": "200"}).output
        assert new in out and old not in out, (cmd, old)


def test_plan_needs_its_rate_and_slos_in_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--model", "llama-3.1-8b", "--slo-tpot-ms", "50"])
    assert "plan needs --request-rate, --slo-ttft-ms" in capsys.readouterr().err


def test_json_results_say_what_produced_them(capsys):
    d = _sim(capsys, "--request-rate", "4", "--num-prompts", "10")
    meta = d["meta"]
    assert meta["infercast_version"] == __version__ and meta["date"][:2] == "20"
    assert meta["inputs"]["rate"] == "4" and meta["inputs"]["num_requests"] == 10
    assert meta["command"].startswith("infercast ")
    # the resolved run: TP, dtypes and scheduler limits, defaults filled in
    cfg = d["config"]
    assert cfg["tp"] == 1 and cfg["weights"] == "bf16" and cfg["scheduler"]["max_num_seqs"] == 256
