"""infercast fleet on the command line: bad input is one line and exit code 2; a tiny day runs."""

import json

import pytest

from infercast.cli import main


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fleet", *args])
    return exc.value.code, capsys.readouterr()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--peak-rate", "2", "--price", "-1"], "--price"),
        (
            [
                "--peak-rate",
                "2",
                "--policy",
                "reactive",
                "--min-replicas",
                "4",
                "--max-replicas",
                "2",
            ],
            "max-replicas",
        ),
        (
            ["--peak-rate", "2", "--policy", "reactive", "--scale-up", "1", "--scale-down", "3"],
            "scale-down",
        ),
        (["--peak-rate", "2", "--policy", "scheduled", "--schedule", "5:2"], "hour 0"),
        (["--peak-rate", "-3"], "peak-rate"),
        (["--policy", "magic", "--peak-rate", "2"], "--policy"),
        (["--peak-rate", "2", "--trace-window", "0:1"], "--trace-window"),
        (["--trace", "azure-conv", "--trace-window", "5:24"], "spans only"),
        (["--peak-rate", "2", "--base-replicas", "2"], "--base-hardware"),
        (["--peak-rate", "2", "--base-hardware", "h200-sxm"], "--base-replicas"),
        (
            ["--peak-rate", "2", "--base-hardware", "h200-sxm", "--base-replicas", "0"],
            "--base-replicas",
        ),
        (["--peak-rate", "2", "--prefill-replicas", "2"], "--disaggregated"),
        (
            ["--peak-rate", "2", "--disaggregated", "--base-hardware", "h200-sxm"],
            "--base-hardware",
        ),
        (["--peak-rate", "2", "--disaggregated", "--decode-replicas", "0"], "--decode-replicas"),
        (["--peak-rate", "2", "--decode-hardware", "h200-sxm"], "--disaggregated"),
        (["--peak-rate", "2", "--disaggregated", "--prefill-price", "-1"], "--prefill-price"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words, capsys):
    code, out = _run([*args, "--hours", "0.1"], capsys)
    lines = [x for x in out.err.strip().splitlines() if x]
    assert code == 2 and len(lines) == 1 and words in lines[0] and "Traceback" not in out.err


def test_trace_missing_columns_is_one_line(tmp_path, capsys):
    bad = tmp_path / "t.csv"
    bad.write_text("time,tokens\n0,10\n1,20\n")
    code, out = _run(["--trace", str(bad), "--hours", "0.1"], capsys)
    assert code == 2 and len(out.err.strip().splitlines()) == 1 and "column" in out.err


def test_tiny_day_runs_as_json(tmp_path, capsys):
    code = 0
    try:
        main(
            [
                "fleet",
                "--peak-rate",
                "1",
                "--hours",
                "0.1",
                "--input-tokens",
                "64",
                "--output-tokens",
                "16",
                "--policy",
                "fixed,predictive",
                "--json",
                "--per-minute",
                str(tmp_path / "m.csv"),
            ]
        )
    except SystemExit as exc:
        code = exc.code
    out = json.loads(capsys.readouterr().out)
    assert code in (0, None)
    assert set(out["policies"]) == {"fixed", "predictive"}
    day = out["policies"]["fixed"]["day"]
    assert day["requests_completed"] + day["requests_rejected"] == day["requests_arrived"] > 0
    assert (tmp_path / "m.csv").read_text().startswith("policy,t_s")


def test_tiny_disaggregated_day_bills_every_gpu_of_a_unit(capsys):
    args = ["--peak-rate", "2", "--hours", "0.1", "--input-tokens", "64", "--output-tokens", "16"]
    unit = ["--disaggregated", "--prefill-replicas", "1", "--decode-replicas", "2"]
    code = 0
    try:
        main(["fleet", *args, *unit, "--policy", "fixed", "--price", "2", "--json"])
    except SystemExit as exc:
        code = exc.code
    out = json.loads(capsys.readouterr().out)
    assert code in (0, None)
    assert out["gpus_per_replica"] == 3 and "2 decode" in out["unit"]
    day = out["policies"]["fixed"]["day"]
    assert day["requests_completed"] + day["requests_rejected"] == day["requests_arrived"] > 0
    assert day["usd"] == pytest.approx(day["replica_hours"] * 3 * 2.0)


def test_units_on_two_parts_bill_each_pools_gpus_at_its_price(capsys):
    args = ["--peak-rate", "2", "--hours", "0.1", "--input-tokens", "64", "--output-tokens", "16"]
    unit = ["--disaggregated", "--decode-replicas", "2", "--prefill-hardware", "h200-sxm"]
    prices = ["--prefill-price", "4", "--decode-price", "2"]
    code = 0
    try:
        main(["fleet", *args, *unit, *prices, "--policy", "fixed", "--json"])
    except SystemExit as exc:
        code = exc.code
    out = json.loads(capsys.readouterr().out)
    assert code in (0, None)
    assert "1 prefill (h200-sxm TP1) + 2 decode (h100-sxm TP1)" in out["unit"]
    day = out["policies"]["fixed"]["day"]
    assert day["member"] == "unit" and day["gpus_per_member"] == 3
    assert day["gpu_hours"] == pytest.approx(3 * day["replica_hours"], rel=1e-12)
    assert day["usd"] == pytest.approx(day["replica_hours"] * (1 * 4.0 + 2 * 2.0), rel=1e-12)
    ticks = out["policies"]["fixed"]["ticks"]
    assert sum(t["usd"] for t in ticks) == pytest.approx(day["usd"], rel=1e-9)
    assert sum(t["gpu_seconds"] for t in ticks) == pytest.approx(3 * 3600 * day["replica_hours"])


def test_param_flags_name_real_fleet_options():
    import typer

    from infercast.cli import build_app
    from infercast.commands.fleet import PARAM_FLAGS

    command = typer.main.get_command(build_app()).commands["fleet"]
    options = {o for p in command.params for o in p.opts}
    assert set(PARAM_FLAGS.values()) <= options
