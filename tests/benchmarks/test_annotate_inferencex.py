"""``benchmarks/annotate_inferencex.py``'s rule for runs whose imported GPU count is X * X."""

from tests.benchmarks.helpers import load_benchmark


def _annotate():
    return load_benchmark("annotate_inferencex")


def _row(run: str, name: str, n: int, engine: str = "trtllm-1.2", hardware: str = "b200"):
    return {
        "id": f"{run}-ttft",
        "metric": "ttft_mean_s",
        "source": "aiconfigurator-silicon-sample",
        "scenario": "concurrency",
        "citation": f"ai-dynamo/aiconfigurator silicon_sample.csv row {name}",
        "n_gpus": str(n),
        "hardware": hardware,
        "engine": engine,
    }


def test_named_tp_ep_runs_stating_the_square_ran_on_x_gpus():
    rows = [
        _row("A", "2026_04_06_dsr1_agg_1024x1024_c4_tp8_ep8_920", 64),
        _row("B", "2026_04_06_dsr1_agg_1024x1024_c4_tp8_ep1_921", 8),  # tp 8 alone: as stated
        _row("C", "2026_04_06_dsr1_agg_1024x1024_c4_tp4_ep4_922", 4),  # already X GPUs
        _row("D", "2026_03_25_dsr1_agg_1024x1024_c4_tp8_0_ep8_0_5", 8),  # the other name form
    ]
    assert _annotate().gpus_ran(rows, {}) == {"A": 8}


def test_an_older_config_follows_its_twins_count():
    rows = [
        _row("T", "2026_03_25_dsr1_agg_1024x8192_c128_tp8_0_ep8_0_1088", 8),
        _row("O1", "dsr1_b200_trtllm_fp4_agg_1024x8192_c128_cfg191", 64),
        _row("O2", "dsr1_b200_trtllm_fp4_agg_8192x1024_c256_cfg191", 64),
        _row("P", "dsr1_b200_trtllm_fp4_agg_8192x1024_c256_cfg177", 64),  # no twin: left
    ]
    assert _annotate().gpus_ran(rows, {"O1": "T"}) == {"O1": 8, "O2": 8}
