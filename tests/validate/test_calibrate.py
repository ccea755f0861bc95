"""Calibration recovers known parameters from synthetic data; profile files round-trip."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile, load_profile
from infercast.cost.profiles import ProfileSet, load_profile_set
from infercast.validate.calibrate import Calibrator
from infercast.validate.cases import read_cases
from infercast.validate.evaluate import Evaluator

COLS = (
    "id,source,scenario,metric,value,model,hardware,n_gpus,tp,weights,kv_cache,engine,input_tokens,"
    "output_tokens,batch\n"
)
TRUE = EfficiencyProfile(gemm_compute_eff=0.55, mem_bw_eff=0.62, step_overhead_s=2.5e-3)
FIELDS = ("gemm_compute_eff", "mem_bw_eff", "step_overhead_s")


def synthetic_cases(truth: ProfileSet):
    """Decode and prefill steps of a few models and batches, 'measured' with the true profile."""
    lines, n = [], 0
    for src, (model, hw, tp) in enumerate(
        [
            ("llama-3.1-8b", "h100-sxm", 1),
            ("llama-3.1-70b", "h200-sxm", 4),
            ("qwen3-32b", "a100-sxm-80gb", 2),
        ]
    ):
        for metric, batches, prompt in (
            ("decode_step_s", (1, 8, 64), 1024),
            ("prefill_time_s", (1, 4), 2048),
        ):
            for b in batches:
                n += 1
                lines.append(
                    f"r{n},src{src},kernel,{metric},1,{model},{hw},{tp},{tp},bf16,bf16,trtllm,"
                    f"{prompt},32,{b}"
                )
    cases = read_cases(COLS + "\n".join(lines) + "\n")
    preds = Evaluator(cases).predict(truth)
    text = COLS + "\n".join(
        line.replace(",1,", f",{p.predicted!r},", 1) for line, p in zip(lines, preds, strict=True)
    )
    return read_cases(text + "\n")


def test_fit_recovers_known_parameters():
    cases = synthetic_cases(ProfileSet(TRUE))
    start = ProfileSet(
        EfficiencyProfile(gemm_compute_eff=0.8, mem_bw_eff=0.85, step_overhead_s=1e-3)
    )
    res = Calibrator(cases, fields=FIELDS, prior_scale=0.0).fit(start, per_group=False)
    for f in FIELDS:
        assert getattr(res.profiles.default, f) == pytest.approx(getattr(TRUE, f), rel=0.01), f
    assert res.median_abs_error_after_pct < 0.5 < 10 < res.median_abs_error_before_pct
    # with the default prior (towards the start) 21 rows still pull the fit most of the way
    with_prior = Calibrator(cases, fields=FIELDS).fit(start, per_group=False)
    assert with_prior.median_abs_error_after_pct < res.median_abs_error_before_pct / 3


def test_group_profile_is_fitted_where_data_supports_it():
    truth = ProfileSet(TRUE, {"hopper/trtllm": TRUE.with_updates(mem_bw_eff=0.8)})
    cases = synthetic_cases(truth)
    res = Calibrator(cases, fields=("mem_bw_eff",), min_group_rows=5, prior_scale=0.0).fit(
        ProfileSet(TRUE)
    )
    assert set(res.profiles.groups) == {"hopper/trtllm", "ampere/trtllm"}
    assert res.profiles.for_group("hopper/trtllm").mem_bw_eff == pytest.approx(0.8, rel=0.05)
    assert res.profiles.for_group("ampere/trtllm").mem_bw_eff == pytest.approx(0.62, rel=0.05)


def test_leave_one_source_out_scores_unseen_sources():
    cases = synthetic_cases(ProfileSet(TRUE))
    cv = Calibrator(cases, fields=FIELDS, prior_scale=0.0).leave_one_source_out(
        min_rows=3, per_group=False
    )
    assert set(cv) == {"src0", "src1", "src2"}
    for v in (
        cv.values()
    ):  # the synthetic truth is one profile: held-out sources are still predicted well
        assert v["held_out_median_abs_error_pct"] < 5.0


def test_profile_set_round_trip_and_plain_loader(tmp_path):
    ps = ProfileSet(
        TRUE.with_updates(name="t"),
        {"hopper/vllm": TRUE.with_updates(mem_bw_eff=0.7, name="x")},
        {"rows": 12, "note": "synthetic"},
    )
    p = tmp_path / "p.toml"
    p.write_text(ps.to_toml())
    back = load_profile_set(p)
    assert (
        back.default.mem_bw_eff == pytest.approx(0.62)
        and back.for_group("hopper/vllm").mem_bw_eff == 0.7
    )
    assert back.for_group("hopper/sglang") == back.default and back.fit["rows"] == 12
    assert load_profile(p).mem_bw_eff == pytest.approx(
        0.62
    )  # estimate/simulate --profile read the default
    assert load_profile_set("builtin") == ProfileSet()
    assert load_profile_set(None).name == "shipped"


def test_fit_stays_inside_physical_ranges_and_names_the_bounds_that_bind():
    """Data 'measured' with a GEMM efficiency below its physical range (0.30 < 0.40): the fit stops
    at the bound and reports it, instead of leaving physics to absorb a missing mechanism."""
    from infercast.cost.efficiency import PHYSICAL_RANGES

    low = PHYSICAL_RANGES["gemm_compute_eff"][0]
    cases = synthetic_cases(ProfileSet(TRUE.with_updates(gemm_compute_eff=0.75 * low)))
    cal = Calibrator(cases, fields=FIELDS, prior_scale=0.0)
    res = cal.fit(
        ProfileSet(EfficiencyProfile(gemm_compute_eff=0.8, mem_bw_eff=0.85, step_overhead_s=1e-3)),
        per_group=False,
    )
    assert res.profiles.default.gemm_compute_eff == pytest.approx(low, rel=1e-6)
    assert not res.profiles.default.out_of_range()
    assert cal.at_bounds(res.profiles) == [f"default: gemm_compute_eff={low:.4g} (lower bound)"]


def test_split_half_scores_each_half_with_the_other_halfs_fit():
    cal = Calibrator(synthetic_cases(ProfileSet(TRUE)), fields=FIELDS, prior_scale=0.0)
    split = cal.split_half(per_group=False)
    assert set(split) == {
        "held_out_half_a_median_abs_error_pct",
        "held_out_half_b_median_abs_error_pct",
        "median_abs_error_pct",
    }
    assert split["median_abs_error_pct"] < 1.0  # noise-free data: each half recovers the truth


def test_shipped_profile_stays_inside_physical_ranges():
    shipped = load_profile_set(None)
    for key, prof in [("default", shipped.default), *shipped.groups.items()]:
        assert not prof.out_of_range(rel=1e-3), (key, prof.out_of_range(rel=1e-3))


def test_rows_infercast_measured_itself_are_scored_but_never_fitted():
    cases = synthetic_cases(ProfileSet(TRUE))
    own = {c.id for c in cases if c.source == "src2"}
    text = COLS + "\n".join(
        f"{c.id},{'infercast-gpu-steps' if c.id in own else c.source},kernel,{c.metric},"
        f"{c.value!r},{c.model},{c.hardware},{c.n_gpus},{c.tp},bf16,bf16,trtllm,"
        f"{c.input_tokens},{c.output_tokens},{c.batch}"
        for c in cases
    )
    cal = Calibrator(read_cases(text + "\n"), fields=FIELDS)
    fitted = {cal.ev.cases[i].id for i in cal.rows()}
    assert fitted and not fitted & own
    assert own <= {cal.ev.cases[i].id for i in cal.ev.predictable}  # still scored
