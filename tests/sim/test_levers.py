"""simulate's production levers: the host KV tier, skewed experts, LoRA adapters (sim/levers.py)."""

import json

import pytest

from infercast.cli import main
from infercast.errors import ConfigError
from infercast.sim.config import build_config
from infercast.sim.presets import build_step_model
from infercast.sim.run import simulate

# 40 prefix groups of 1,024 tokens (64 blocks each) on a KV pool of 600 blocks: the groups do not
# fit together, so HBM's prefix cache evicts what a later request of the same group wants.
OFFLOAD = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "mode": "exact",
    "seed": 3,
    "scheduler": {"prefix_caching": True, "num_blocks": 600, "max_num_seqs": 16},
    "workload": {
        "arrival": "offline",
        "num_requests": 200,
        "prefix_groups": 40,
        "prefix_tokens": 1024,
        "input": {"mean": 1100},
        "output": {"mean": 16},
    },
}


def _run(data):
    cfg = build_config(data)
    return simulate(cfg, build_step_model(cfg, "builtin"))


def test_reloads_are_charged_at_the_host_link_bandwidth_by_hand():
    # Offline arrivals: every request is queued at t = 0, so the schedule does not depend on step
    # times and two links differ only by the reload time: loaded blocks x bytes per block / link.
    slow = _run({**OFFLOAD, "kv_offload": {"gib": 64, "host_link_gbps": 10.0}})
    fast = _run({**OFFLOAD, "kv_offload": {"gib": 64, "host_link_gbps": 1e6}})
    loaded = slow.extra["kv_offload_blocks_loaded"]
    assert loaded == fast.extra["kv_offload_blocks_loaded"] > 0
    bytes_per_block = (
        16 * 131072
    )  # llama-3.1-8b bf16 KV: 32 layers x 8 kv heads x 128 x 2 x 2 B per token
    expect = loaded * bytes_per_block * (1 / 10e9 - 1 / 1e15)
    assert slow.summary.duration_s - fast.summary.duration_s == pytest.approx(expect, rel=1e-6)
    assert slow.extra["kv_offload_reload_s"] == pytest.approx(loaded * bytes_per_block / 10e9)


def test_offload_saves_the_recompute_of_evicted_prefixes():
    none = _run(OFFLOAD)
    tier = _run({**OFFLOAD, "kv_offload": {"gib": 64}})  # H100: PCIe Gen5, 55.63 GB/s measured
    assert tier.extra["kv_offload_blocks_loaded"] > 0
    assert tier.summary.duration_s < none.summary.duration_s
    assert "pcie-gen5-x16 measured" in tier.extra["kv_offload_link_source"]


def test_overlap_hides_reloads_under_compute():
    serial = _run({**OFFLOAD, "kv_offload": {"gib": 64}})
    overlap = _run({**OFFLOAD, "kv_offload": {"gib": 64, "overlap": True}})
    assert overlap.summary.duration_s < serial.summary.duration_s


@pytest.mark.parametrize(
    ("data", "msg"),
    [
        ({"kv_offload": {"gib": 8}}, "prefix_caching"),
        (
            {
                "kv_offload": {"gib": 8},
                "scheduler": {"prefix_caching": True},
                "speculative": {"method": "eagle"},
            },
            "not modelled",
        ),
        ({"expert_routing": {"redundant": 2}}, "exactly one of skew"),
        ({"lora": {"rank": 0}}, "lora.rank"),
    ],
)
def test_bad_lever_configs_name_the_field(data, msg):
    with pytest.raises(ConfigError, match=msg):
        build_config(data)


def test_expert_skew_on_a_dense_model_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--model", "llama-3.1-8b", "--expert-skew", "1", "--num-prompts", "5"])
    assert exc.value.code == 2
    assert "dense" in capsys.readouterr().err


def test_flags_reach_the_run(capsys):
    main(
        [
            "simulate",
            "--model",
            "qwen3-30b-a3b",
            "--tp",
            "4",
            "--ep",
            "4",
            "--attn-dp",
            "--expert-skew",
            "1.2",
            "--redundant-experts",
            "8",
            "--num-prompts",
            "20",
            "--request-rate",
            "5",
            "--json",
            "--no-progress",
        ]
    )
    skewed = json.loads(capsys.readouterr().out)
    assert skewed["config"]["expert_routing"] == {"skew": 1.2, "loads": None, "redundant": 8}
    main(
        [
            "simulate",
            "--lora-rank",
            "16",
            "--lora-adapters",
            "8",
            "--num-prompts",
            "20",
            "--request-rate",
            "5",
            "--json",
            "--no-progress",
        ]
    )
    assert json.loads(capsys.readouterr().out)["config"]["lora"]["adapters"] == 8
