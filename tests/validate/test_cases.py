"""Reading measurement CSVs: documented columns, unknown ones ignored, a clear reason per bad
row."""

from __future__ import annotations

import pytest

from infercast.errors import DataError
from infercast.validate.cases import load_cases, read_cases

HEADER = (
    "id,scenario,metric,value,model,hardware,weights,tp,input_tokens,output_tokens,batch,extra,"
    "my_note\n"
)


def test_good_row_parsed_and_unknown_column_ignored():
    (case,) = read_cases(
        HEADER
        + 'r1,kernel,decode_step_s,0.01,llama-3.1-8b,h100-sxm,BF16,1,512,32,8,"{""a"": 1}",hello\n'
    )
    assert case.problem is None
    assert (case.value, case.tp, case.batch, case.weights, case.extra) == (
        0.01,
        1,
        8,
        "bf16",
        {"a": 1},
    )


@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        ("r,kernel,decode_step_s,fast,,,,,,,,,", "value='fast' is not a number"),
        ("r,kernel,decode_step_s,-1,,,,,,,,,", "must be a positive finite number"),
        ("r,kernel,decode_step_s,0.1,,,,two,,,,,", "tp='two' is not a number"),
        ("r,kernel,decode_step_s,0.1,,,,1.5,,,,,", "tp='1.5' is not a positive integer"),
        ("r,kernel,decode_step_s,0.1,,,,,,,,{oops,", "extra is not valid JSON"),
        (",kernel,decode_step_s,0.1,,,,,,,,,", "required column 'id' is empty"),
        ("r,kernel,decode_step_s,0.1,,,,,,,,,,,extra-cell", "more cells than header columns"),
    ],
)
def test_malformed_row_has_a_per_row_reason(cells, reason):
    (case,) = read_cases(HEADER + cells + "\n")
    assert case.problem is not None and reason in case.problem
    assert case.problem.startswith("line 2:")


def test_duplicate_id_is_reported_not_dropped():
    cases = read_cases(
        HEADER + "a,kernel,decode_step_s,0.1,,,,,,,,,\na,kernel,decode_step_s,0.2,,,,,,,,,\n"
    )
    assert len(cases) == 2 and cases[0].problem is None and "duplicate id 'a'" in cases[1].problem


def test_missing_required_column_is_a_file_error(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("id,metric,value\nx,ttft_mean_s,1\n")
    with pytest.raises(DataError, match="missing column"):
        load_cases(p)
    with pytest.raises(DataError, match="cannot read"):
        load_cases(tmp_path / "absent.csv")


def test_shipped_set_parses_cleanly():
    cases = load_cases()
    assert len(cases) == 3723 and not [c for c in cases if c.problem]


def test_shipped_disaggregated_layouts_from_a_recipe_are_whole_and_cited():
    # data/README.md, "Annotation added in this package (2026-12-04, issue 15 item 7)": every row
    # whose layout comes from an InferenceX config states both pools' workers, cites the config
    # at a commit, and ran without speculative decoding (not modelled with disaggregation)
    import re

    from infercast.closedform.disagg import pool_workers

    cases = [c for c in load_cases() if "layout_source" in c.extra]
    assert len(cases) == 144 and {c.scenario for c in cases} == {"disaggregated"}
    runs: dict[str, set[str]] = {}
    for c in cases:
        src = c.extra["layout_source"]
        assert re.match(
            r"SemiAnalysisAI/InferenceX \.github/configs/nvidia-master\.yaml @[0-9a-f]{40} ", src
        )
        assert "(no spec-decoding)" in src and f" conc {c.concurrency} " in src
        assert c.extra.get("length_range_ratio") == 0.8  # an InferenceX run
        pools = [c.extra[side] for side in ("prefill", "decode")]
        for p in pools:
            tp, adp = int(p["tp_size"]), int(p["attention_dp_size"])
            assert int(p["num_workers"]) >= 1 and (tp == 1 or adp == 1)
            assert int(p["moe_ep_size"]) * int(p["moe_tp_size"]) == tp * adp
        if pools[1]["batch_size"]:  # the recipe's decode max_batch_size, as its file name says
            assert f"_batch{pools[1]['batch_size']}_" in src and not pools[0]["batch_size"]
        gpus = tuple(int(p["tp_size"]) * int(p["attention_dp_size"]) for p in pools)
        _, note = pool_workers(*pools, c.n_gpus, gpus)
        assert note is None  # stated, so no longer scored with the assumed rows
        runs.setdefault(c.id.rsplit("-", 1)[0], set()).add(c.metric)
    assert all(m == {"ttft_mean_s", "tpot_mean_s"} for m in runs.values())  # both rows of a run


def test_shipped_inferencex_twins_measure_exactly_what_their_annotated_run_measures():
    # data/README.md, "Annotation added in this package (2026-12-04, twins)": a run whose TTFT and
    # TPOT equal, to every digit, those of an annotated InferenceX run of the same lengths and
    # concurrency is that run, and carries its client's length draw
    cases = load_cases()
    by_id = {c.id: c for c in cases}
    twins = [c for c in cases if "inferencex_twin" in c.extra]
    assert len(twins) == 98
    for c in twins:
        other = by_id[f"{c.extra['inferencex_twin']}-{c.id.rsplit('-', 1)[1]}"]
        assert other.value == c.value and other.metric == c.metric
        assert (other.input_tokens, other.output_tokens, other.concurrency) == (
            c.input_tokens,
            c.output_tokens,
            c.concurrency,
        )
        assert c.extra["length_range_ratio"] == other.extra["length_range_ratio"] == 0.8


def test_shipped_sample_twins_are_sglang_runs_of_their_twins_lengths_and_clients():
    # data/README.md, "twins whose InferenceX copy the import left out": the twin's record name
    # (in aiconfigurator's silicon sample, not in this file) states the run's lengths and clients
    cases = [c for c in load_cases() if "inferencex_twin_record" in c.extra]
    assert len(cases) == 46
    for c in cases:
        assert c.scenario == "concurrency" and c.engine.startswith("sglang")
        assert c.extra["length_range_ratio"] == 0.8
        twin = c.extra["inferencex_twin_record"]
        assert twin.startswith(("2026_03_25_", "2026_04_06_"))
        assert f"_{c.input_tokens}x{c.output_tokens}_c{c.concurrency}_" in twin


def test_shipped_vllm_recipe_keys_only_on_inferencex_vllm_runs():
    # data/README.md, "vLLM recipes": every InferenceX vLLM run scheduled asynchronously; the
    # gpt-oss B200 script's W4A8 experts, and its FP8 KV on the v0.15.1 image
    cases = load_cases()
    lagged = [c for c in cases if c.extra.get("vllm_async_scheduling")]
    assert len(lagged) == 274
    assert all(c.engine.startswith("vllm") and c.extra["length_range_ratio"] == 0.8 for c in lagged)
    w4a8 = [c for c in cases if "experts_compute" in c.extra]
    assert len(w4a8) == 48
    assert {(c.model, c.hardware, c.extra["experts_compute"]) for c in w4a8} == {
        ("gpt-oss-120b", "b200", "fp8")
    }
    assert {c.engine for c in w4a8 if c.extra.get("kv_cache_dtype") == "fp8"} == {"vllm-0.15.1"}


def test_shipped_attention_dp_balance_only_on_inferencex_trtllm_attention_dp_runs():
    cases = [c for c in load_cases() if "attention_dp_balance" in c.extra]
    assert len(cases) == 34
    for c in cases:
        assert c.scenario == "concurrency" and c.engine.startswith("trtllm")
        assert c.extra.get("length_range_ratio") == 0.8  # an InferenceX run
        assert (c.ep or 1) > (c.tp or 1) * (c.pp or 1)  # attention data parallel
        expected = [50, 10] if c.model == "gpt-oss-120b" else [60, 0]  # the recipes' settings
        assert c.extra["attention_dp_balance"] == expected


def test_shipped_runs_on_fewer_gpus_state_the_square_of_what_they_ran():
    # data/README.md, "GPUs counted twice": a run named ``_tpX_epX_`` in InferenceX's 2026_04_06
    # file, or of an older config with such a twin, states X * X GPUs; it ran on X
    cases = [c for c in load_cases() if "n_gpus_ran" in c.extra]
    assert len(cases) == 122
    runs: dict[str, set[str]] = {}
    for c in cases:
        x = c.extra["n_gpus_ran"]
        assert c.source == "aiconfigurator-silicon-sample" and c.scenario == "concurrency"
        assert x in (2, 4, 8) and c.n_gpus == x * x == c.ep * c.ep
        assert c.tp == c.n_gpus or (c.tp == 1 and c.dp == c.n_gpus)
        runs.setdefault(c.id.rsplit("-", 1)[0], set()).add(c.metric)
    assert all(m == {"ttft_mean_s", "tpot_mean_s"} for m in runs.values())
    by_id = {c.id: c for c in load_cases()}
    for doubled, twin in (("AIC-4620", "AIC-2739"), ("AIC-0595", "AIC-2805")):
        assert by_id[f"{doubled}-ttft"].value == by_id[f"{twin}-ttft"].value
        assert by_id[f"{twin}-ttft"].n_gpus == by_id[f"{doubled}-ttft"].extra["n_gpus_ran"]
