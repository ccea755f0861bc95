"""Round 4: TensorRT-LLM v1.0 perf-overview MoE rows run with --ep (validate/setup.py).

Hand-checked row TRT10-0130: Qwen3-235B-A22B FP4 on 8 x B200, "TP8", 1000/1000, 42,391 output
tok/s. The overview's MoE command is ``trtllm-bench --tp $tp_size --pp $pp_size --ep $ep_size``,
so the row is predicted with the experts split over the TP group (ep = tp = 8, attention TP):
each rank runs 1/8 of the token-expert rows with the full 4,096-wide hidden size, not all of
them (tests/cost/test_step_moe_activations.py has those bytes). Dense rows of the same source
and MoE rows on one GPU are unchanged.
"""

from __future__ import annotations

from infercast.validate.cases import read_cases
from infercast.validate.setup import layout

COLS = (
    "id,source,scenario,metric,value,model,hardware,n_gpus,tp,ep,weights,engine,input_tokens,"
    "output_tokens\n"
)


def _setup(cells: str):
    (c,) = read_cases(COLS + cells + "\n")
    assert c.problem is None, c.problem
    return layout(c)


def test_moe_tp8_row_runs_expert_parallel():
    lay = _setup(
        "TRT10-0130,trtllm-perf-overview-v1.0,offline,output_throughput_total,42391,qwen3-235b-"
        "a22b,b200,8,8,,fp4,tensorrt-llm-1.0 (pytorch),1000,1000"
    )
    assert (lay.setup.tp, lay.setup.ep, lay.setup.attn_dp) == (8, 8, False)
    assert any("ep not stated: ep=8" in n for n in lay.notes)


def test_dense_single_gpu_stated_and_other_sources_unchanged():
    dense = _setup(
        "TRT10-X,trtllm-perf-overview-v1.0,offline,output_throughput_total,4205,llama-3.3-70b,h100-"
        "sxm,2,2,,fp8,tensorrt-llm-1.0 (pytorch),1000,1000"
    )
    one = _setup(
        "TRT10-Y,trtllm-perf-overview-v1.0,offline,output_throughput_total,25828,qwen3-30b-a3b,"
        "b200,1,1,,fp4,tensorrt-llm-1.0 (pytorch),1000,1000"
    )
    older = _setup(
        "TRT17-Z,trtllm-perf-overview-v0.17,offline,output_throughput_total,1000,mixtral-8x7b,h100-"
        "sxm,2,2,,fp8,tensorrt-llm-0.17,1000,1000"
    )
    stated = _setup(
        "TRT10-W,trtllm-perf-overview-v1.0,offline,output_throughput_total,1000,qwen3-235b-a22b,"
        "b200,8,8,4,fp4,tensorrt-llm-1.0 (pytorch),1000,1000"
    )
    assert dense.setup.ep == one.setup.ep == older.setup.ep == 1
    assert stated.setup.ep == 4
    assert not any("ep not stated" in n for lay in (dense, one, older, stated) for n in lay.notes)
