"""validate / calibrate commands: JSON contract, per-row reasons, plot, profile written and read
back."""

from __future__ import annotations

import json

import pytest

from infercast.cost.efficiency import load_profile

CSV = (
    "id,source,scenario,metric,value,model,hardware,n_gpus,tp,weights,engine,input_tokens,"
    "output_tokens,batch,concurrency,my_extra_column\n"
    """a,s1,kernel,decode_step_s,0.012,llama-3.1-8b,h100-sxm,1,1,bf16,vllm,1024,32,8,,ignored
b,s1,single_stream,tokens_per_s_single_stream,150,llama-3.1-8b,h100-sxm,1,1,bf16,vllm,128,256,1,,
c,s2,concurrency,ttft_mean_s,0.2,llama-3.1-8b,h100-sxm,1,1,fp8,vllm,1024,256,,16,
d,s2,concurrency,tpot_mean_s,0.009,llama-3.1-8b,h100-sxm,1,1,fp8,vllm,1024,256,,16,
e,s2,kernel,decode_step_s,not-a-number,llama-3.1-8b,h100-sxm,1,1,bf16,vllm,1024,32,8,,
"""
)


@pytest.fixture
def data(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_text(CSV)
    return p


def test_validate_json_contract(data, tmp_path, cli):
    plot = tmp_path / "v.png"
    code, out, _ = cli(
        ["validate", "--data", str(data), "--json", "--plot", str(plot), "--profile", "builtin"],
    )
    assert code in (0, None)
    d = json.loads(out)
    rows = {r["id"]: r for r in d["rows"]}
    assert set(rows) == set("abcde")
    for r in d["rows"]:
        assert {"id", "metric", "measured", "predicted", "error_pct", "skipped_reason"} <= set(r)
    assert rows["a"]["predicted"] > 0 and rows["a"]["skipped_reason"] is None
    assert rows["a"]["error_pct"] == pytest.approx((rows["a"]["predicted"] - 0.012) / 0.012 * 100)
    assert (
        rows["e"]["predicted"] is None
        and "value='not-a-number' is not a number" in rows["e"]["skipped_reason"]
    )
    for part in ("scenario", "metric"):
        for s in d["summary"][part].values():
            assert {
                "count",
                "predicted",
                "median_abs_error_pct",
                "mean_abs_error_pct",
                "within_10_pct",
                "within_25_pct",
            } <= set(s)
    assert (
        d["summary"]["scenario"]["kernel"]["count"] == 2
        and d["summary"]["scenario"]["kernel"]["predicted"] == 1
    )
    assert d["summary"]["overall"]["coverage"] == pytest.approx(0.8)
    assert "floor" in d and plot.stat().st_size > 10_000


def test_validate_table_and_bad_input(data, cli):
    code, out, _ = cli(["validate", "--data", str(data), "--by", "source", "--no-floor"])
    assert code in (0, None) and "s1" in out and "worst rows" in out
    code, _, err = cli(["validate", "--data", str(data), "--by", "colour"])
    assert code == 2 and err.count("\n") == 1 and "--by" in err
    code, _, err = cli(["validate", "--data", "/nonexistent.csv"])
    assert code == 2 and "cannot read measurements" in err


def test_validate_simulates_by_default_and_fast_gives_the_closed_form(data, cli):
    args = ["validate", "--data", str(data), "--json", "--no-floor"]
    code, out, _ = cli(args)
    rows = {r["id"]: r for r in json.loads(out)["rows"]}
    # concurrency rows: simulated, the closed form kept beside each as the cross-check
    assert code in (0, None) and rows["c"]["closed_form"] > 0 and rows["d"]["closed_form"] > 0
    assert rows["d"]["predicted"] != rows["d"]["closed_form"]
    code, out, _ = cli(args + ["--fast"])
    fast = {r["id"]: r for r in json.loads(out)["rows"]}
    assert "closed_form" not in fast["c"] and fast["d"]["predicted"] == rows["d"]["closed_form"]
    code, out, _ = cli(args + ["--simulate-all"])  # the old flag: now the default
    assert {r["id"]: r for r in json.loads(out)["rows"]} == rows


def test_compare_fast_prints_the_agreement_and_excludes_fast(data, cli):
    code, out, _ = cli(["validate", "--data", str(data), "--no-floor", "--compare-fast"])
    assert code in (0, None) and "simulation (default) vs closed form" in out
    assert "concurrency/tpot_mean_s" in out
    code, _, err = cli(["validate", "--data", str(data), "--fast", "--compare-fast"])
    assert code == 2 and err.count("\n") == 1 and "--compare-fast" in err
    code, _, err = cli(["validate", "--data", str(data), "--fast", "--simulate-all"])
    assert code == 2 and err.count("\n") == 1 and "--simulate-all" in err


def test_calibrate_writes_a_profile_validate_and_estimate_accept(data, tmp_path, cli):
    out_path = tmp_path / "p.toml"
    code, out, _ = cli(
        [
            "calibrate",
            "--data",
            str(data),
            "--out",
            str(out_path),
            "--json",
            "--min-group-rows",
            "2",
        ],
    )
    assert code in (0, None)
    d = json.loads(out)
    assert d["fit"]["rows"] == 4  # every row but the malformed one has a closed form
    assert d["fit"]["path"] == "simulated path"  # scored as validate predicts by default
    assert d["leave_one_source_out"] == {}  # no source has the 10 rows a fold needs
    assert load_profile(out_path).name == "calibrated"
    code, out, _ = cli(
        ["validate", "--data", str(data), "--json", "--profile", str(out_path), "--no-floor"],
    )
    assert code in (0, None) and json.loads(out)["profile"] == "calibrated"
    assert json.loads(out)["profile_fit"]["path"] == "simulated path"  # the profile's own scores
    code, _, _ = cli(["estimate", "--profile", str(out_path), "--json"])
    assert code in (0, None)


def test_calibrate_rescore_keeps_the_values_and_recomputes_the_scores(data, tmp_path, cli):
    from infercast.cost.profiles import load_profile_set

    first, again = tmp_path / "a.toml", tmp_path / "b.toml"
    argv = ["calibrate", "--data", str(data), "--min-group-rows", "2"]
    code, _, _ = cli([*argv, "--fast", "--out", str(first)])
    assert code in (0, None) and load_profile_set(first).fit["path"] == "closed forms"
    code, out, _ = cli([*argv, "--rescore", str(first), "--out", str(again), "--json"])
    assert code in (0, None)
    kept, new = load_profile_set(first), load_profile_set(again)
    assert (new.default, new.groups) == (kept.default, kept.groups)
    assert new.fit["path"] == "simulated path" and new.fit["data"] == kept.fit["data"]
    assert new.fit["scores"].endswith(f"values kept from {first}")


def test_assume_weights_fills_missing_dtypes(tmp_path, cli):
    p = tmp_path / "w.csv"
    p.write_text(
        "id,scenario,metric,value,model,hardware,n_gpus,tp,input_tokens,output_tokens,batch\n"
        "a,kernel,decode_step_s,0.01,llama-3.1-8b,h100-sxm,1,1,1024,32,8\n"
        "b,kernel,decode_step_s,0.01,deepseek-r1,h200-sxm,8,8,1024,32,8\n"
    )
    code, out, _ = cli(
        ["validate", "--data", str(p), "--json", "--no-floor", "--assume-weights", "none"]
    )
    assert (
        json.loads(out)["rows"][0]["skipped_reason"]
        == "the source does not state the weight precision"
    )
    code, out, _ = cli(
        ["validate", "--data", str(p), "--json", "--no-floor"]
    )  # default: the checkpoint's
    rep = json.loads(out)
    assert [r["assumed_weights"] for r in rep["rows"]] == [
        "bf16",
        "fp8",
    ]  # torch_dtype; quantization_config
    assert rep["summary"]["assumed_weights"]["count"] == 2 and rep["rows"][0]["predicted"] > 0
    assert "weights not stated: bf16 assumed" in rep["rows"][0]["notes"]
    code, out, _ = cli(
        ["validate", "--data", str(p), "--json", "--no-floor", "--assume-weights", "fp8"]
    )
    assert json.loads(out)["rows"][0]["assumed_weights"] == "fp8"
    code, _, err = cli(["validate", "--data", str(p), "--assume-weights", "fp7"])
    assert code == 2 and "fp7" in err
