"""Engine presets: every shipped one loads and cites each value; one rule of each against the
engine behaviour its source describes; bad presets fail in one line."""

from __future__ import annotations

import tomllib

import pytest

from infercast.cli import main
from infercast.errors import ConfigError
from infercast.specs.catalog import data_path, load_hardware
from infercast.specs.engines import (
    RATIO_PARAMS,
    EnginePreset,
    load_engine,
    parse_preset,
    preset_name,
    preset_names,
    shipped_presets,
)

GB = 1e9


def test_every_shipped_preset_loads_and_cites_each_value():
    presets = shipped_presets()
    assert (
        {p.name for p in presets}
        == set(preset_names())
        >= {"vllm-0.12", "vllm-0.6", "sglang-0.5", "trtllm-1.0", "trtllm-engine-0.17"}
    )
    for p in presets:
        for field in EnginePreset.model_fields:
            if field not in (
                "name",
                "engine",
                "version",
                "description",
                "profile_group",
                "sources",
                "by_gpu",
                "memory_fraction_by_tp",
            ) and (field not in RATIO_PARAMS or p.admission == "sglang-new-token-ratio"):
                if field == "max_prefill_tokens" and not p.max_prefill_tokens:
                    continue  # no such cap: nothing to cite
                assert len(p.sources[field]) > 20, (p.name, field)


def test_families_name_their_newest_preset():
    assert load_engine("vllm").name == "vllm-0.12"
    assert load_engine("sglang").name == "sglang-0.5"
    assert load_engine("trtllm").name == "trtllm-1.0"
    assert load_engine("trtllm-engine").name == "trtllm-engine-0.17"


def test_vllm_012_batch_defaults_by_gpu():
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: 1024 / 8192 on >= 70 GiB parts that
    # are not A100 (H100), 256 / 2048 on A100 (PR #17885) and smaller parts
    v = load_engine("vllm-0.12")
    h100 = v.for_hardware("h100-sxm", load_hardware("h100-sxm").memory_bytes)
    a100 = v.for_hardware("a100-sxm-80gb", 80 * GB)
    l40s = v.for_hardware("l40s", 48 * GB)
    assert (h100.max_num_seqs, h100.max_num_batched_tokens) == (1024, 8192)
    assert (a100.max_num_seqs, a100.max_num_batched_tokens) == (256, 2048)
    assert (l40s.max_num_seqs, l40s.max_num_batched_tokens) == (256, 2048)
    assert v.policy == "chunked" and v.chunked_prefill  # "V1 always uses chunked prefills"


def test_vllm_06_runs_prefill_only_steps():
    # vLLM V0 without chunked prefill: prefills are scheduled first, decodes wait
    # (core/scheduler.py)
    from infercast.sched import Request, Scheduler, SchedulerConfig

    v = load_engine("vllm-0.6")
    s = Scheduler(
        SchedulerConfig(
            policy=v.policy,
            max_num_seqs=v.max_num_seqs,
            max_num_batched_tokens=v.max_num_batched_tokens,
            block_size=v.block_size,
            num_blocks=1000,
        )
    )
    s.add_request(Request("a", prompt_tokens=100, max_output_tokens=10))
    s.update(s.schedule())
    s.add_request(Request("b", prompt_tokens=100, max_output_tokens=10))
    assert [q.request_id for q in s.schedule().seqs] == ["b"]  # the decode of "a" waits
    assert v.admission_watermark == 0.01 and not v.chunked_prefill


def test_sglang_chunk_and_memory_fraction_follow_server_args():
    # server_args.py: chunked_prefill_size 2048 under 35 GB, 8192 under 160 GB, 16384 above;
    # mem_fraction_static 0.88 (TP 1) ... 0.81 (TP 8)
    s = load_engine("sglang")
    assert s.for_hardware("rtx-4090", 24 * GB).max_num_batched_tokens == 2048
    assert s.for_hardware("h100-sxm", 80 * GB).max_num_batched_tokens == 8192
    b200 = s.for_hardware("b200", load_hardware("b200").memory_bytes, tp=8)
    assert b200.max_num_batched_tokens == 16384 and b200.memory_fraction == 0.81
    assert s.for_hardware("h100-sxm", 80 * GB, tp=1).memory_fraction == 0.88
    assert s.policy == "prefill-first" and s.block_size == 1  # page_size 1


@pytest.mark.parametrize("name", ["trtllm-1.0", "trtllm-engine-0.17"])
def test_trtllm_kv_is_a_fraction_of_the_free_memory(name):
    # KvCacheConfig.free_gpu_memory_fraction 0.9: of what weights and activations leave free
    t = load_engine(name)
    weights, act, device = 70 * GB, 2 * GB, 80 * GB
    fraction = t.memory_fraction_for(weights, act, device)
    assert fraction * device - weights - act == pytest.approx(0.9 * (device - weights - act))
    vllm = load_engine("vllm").memory_fraction_for(weights, act, device)
    assert vllm * device - weights - act == pytest.approx(
        0.9 * device - weights - act
    )  # of the total
    # GUARANTEED_NO_EVICT: simulated by the admission rule, so no longer listed as unmodelled
    assert t.preemption == "reserve" and t.admission == "reserve-full-output"
    assert "KV reserved" not in " ".join(t.unmodelled)


def test_admission_rules_of_the_shipped_presets():
    assert load_engine("vllm-0.12").admission == load_engine("vllm-0.6").admission == "current-use"
    s = load_engine("sglang-0.5")
    assert s.admission == "sglang-new-token-ratio"
    assert (s.new_token_ratio_init, s.new_token_ratio_min_factor) == (0.7, 0.14)
    assert (s.new_token_ratio_decay_steps, s.clip_max_new_tokens, s.retract_decode_steps) == (
        600,
        4096,
        20,
    )


def test_engine_defaults_carry_the_admission_rule():
    from infercast.sim.build import engine_defaults

    sched = engine_defaults(load_engine("sglang-0.5"), {"hardware": "h100-sxm"})["scheduler"]
    assert sched["admission"] == "sglang-new-token-ratio" and sched["clip_max_new_tokens"] == 4096
    trt = engine_defaults(load_engine("trtllm-1.0"), {"hardware": "h100-sxm"})["scheduler"]
    assert trt["admission"] == "reserve-full-output"


def test_bad_admission_rule_names_the_field():
    good = _shipped("vllm-0.12")
    with pytest.raises(ConfigError, match=r"admission: .*'greedy'"):
        parse_preset({**good, "admission": "greedy"}, "x.toml")
    # choosing SGLang's rule needs its parameters cited
    with pytest.raises(ConfigError, match="add new_token_ratio_init"):
        parse_preset({**good, "admission": "sglang-new-token-ratio"}, "x.toml")
    # a user's preset may choose any rule (the rule's source cited like any value)
    mine = parse_preset({**good, "admission": "reserve-full-output"}, "x.toml")
    assert mine.admission == "reserve-full-output"


def test_validate_rows_map_to_presets():
    assert (
        preset_name("tensorrt-llm-0.17 (trtllm-bench; gh200: gptManagerBenchmark)")
        == "trtllm-engine-0.17"
    )
    assert preset_name("tensorrt-llm-1.0 (pytorch, trtllm-bench)") == "trtllm-1.0"
    assert preset_name("vllm-0.12.0") == "vllm-0.12"
    assert preset_name("vllm-0.6.3") == "vllm-0.6"
    assert preset_name("sglang-0.5.9") == "sglang-0.5"
    assert preset_name("llama.cpp b6918") is None


def _shipped(name: str) -> dict:
    return tomllib.loads(data_path("engines", f"{name}.toml").read_text())


def test_bad_presets_fail_in_one_line(tmp_path):
    good = _shipped("vllm-0.12")
    missing = {k: v for k, v in good.items() if k != "max_num_seqs"}
    with pytest.raises(ConfigError, match=r"max_num_seqs: Field required$"):
        parse_preset(missing, "x.toml")
    with pytest.raises(ConfigError, match=r"block_size: .*integer.*\(got 'big'\)"):
        parse_preset({**good, "block_size": "big"}, "x.toml")
    with pytest.raises(ConfigError, match=r"policy: "):
        parse_preset({**good, "policy": "fifo"}, "x.toml")
    with pytest.raises(ConfigError, match=r"max_num_sequences: Extra inputs"):
        parse_preset({**good, "max_num_sequences": 3}, "x.toml")
    uncited = {**good, "sources": {k: v for k, v in good["sources"].items() if k != "block_size"}}
    with pytest.raises(ConfigError, match="add block_size to \\[sources\\]"):
        parse_preset(uncited, "x.toml")
    with pytest.raises(ConfigError, match="unknown engine 'vllm-9'"):
        load_engine("vllm-9")


def test_cli_bad_engine_exits_2(tmp_path, capsys):
    bad = tmp_path / "mine.toml"
    bad.write_text('name = "mine"\n')
    for args in (
        ["simulate", "--engine", "nope", "--rate", "1", "--num-requests", "5", "--no-progress"],
        ["estimate", "--engine", str(bad)],
        ["validate", "--engine", "nope"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and ("unknown engine" in err or "engine preset" in err), (
            err
        )


def test_user_preset_file_is_accepted(tmp_path, capsys):
    import json

    mine = tmp_path / "mine.toml"
    mine.write_text(
        data_path("engines", "vllm-0.12.toml")
        .read_text()
        .replace('name = "vllm-0.12"', 'name = "mine"')
        .replace("max_num_seqs = 1024", "max_num_seqs = 3")
    )
    main(
        [
            "simulate",
            "--engine",
            str(mine),
            "--profile",
            "builtin",
            "--concurrency",
            "8",
            "--num-requests",
            "16",
            "--no-progress",
            "--json",
        ]
    )
    assert json.loads(capsys.readouterr().out)["mean_batch_size"] <= 3
    main(["engines", "--show", str(mine)])
    assert json.loads(capsys.readouterr().out)["max_num_seqs"] == 3


def test_engines_command_lists_every_preset(capsys):
    import json

    main(["engines", "--json"])
    listed = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in listed] == preset_names()
    main(["engines"])
    out = capsys.readouterr().out
    assert "prefill-first" in out and "sglang-0.5" in out
    main(["engines", "--show", "sglang"])
    shown = json.loads(capsys.readouterr().out)
    assert "get_next_batch_to_run" in shown["sources"]["policy"]


def test_sglang_mixed_chunk_preset_decodes_inside_prefill_steps_under_the_input_cap():
    # scheduler.py get_new_batch_prefill: --enable-mixed-chunk mixes the running batch into the
    # prefill batch (the chunked policy), PrefillAdder's rem_input_tokens = max_prefill_tokens
    # (server_args default 16384) less the decodes
    from infercast.sim.build import engine_defaults

    mixed, plain = load_engine("sglang-0.5-mixed"), load_engine("sglang-0.5")
    assert (mixed.policy, plain.policy) == ("chunked", "prefill-first")
    sched = engine_defaults(mixed, {"hardware": "h200-sxm"})["scheduler"]
    assert sched["max_prefill_tokens"] == 16384 and sched["admission"] == plain.admission
    assert "max_prefill_tokens" not in engine_defaults(plain, {"hardware": "h200-sxm"})["scheduler"]
