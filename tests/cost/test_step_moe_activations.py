"""Round 4: the routed experts' hidden-size activations per rank, and the reduction of their
outputs.

Hand numbers (Qwen3-235B-A22B ``config.json``: hidden 4096, 128 experts, top-8, expert width
1536, 94 MoE layers; BF16 activations, 2 bytes). One decode step of 64 sequences routes
64 x 8 = 512 token-expert rows per layer.

- Pure TP8 (TensorRT-LLM moe_tp_size 8): every rank holds every expert's 1/8 FFN slice, so it
  runs all 512 rows with their full 4,096-wide input and writes 512 full-width partial outputs:
  94 x 512 x 4096 x 2 B = 394,264,576 B each way (the model charged 1/8 of that).
- TP8 with EP8 (moe_tp_size 1): each rank runs the 512 / 8 = 64 rows routed to its 16 experts:
  49,283,072 B each way.
- ``moe.finalize`` reads those expert output rows and writes one row per token (64 x 4096 x 2 B
  per layer = 49,283,072 B), as TensorRT-LLM's ``finalizeMoeRoutingKernel`` and vLLM's ``moe_sum``
  do. FLOPs and weight bytes are unchanged (1/8 of the total per rank either way).
"""

from __future__ import annotations

import pytest

from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

ROWS_FULL = 94 * 64 * 8 * 4096 * 2  # 394,264,576 B


def _ops(par: Parallelism) -> dict:
    sm = StepModel(
        load_model("qwen3-235b-a22b"), load_hardware("h200-sxm"), Precision.parse("bf16"), par
    )
    return {o.op.name: o.op for o in sm.decode_cost(64, 1024).ops}


@pytest.mark.parametrize(
    ("par", "rows_bytes"),
    [(Parallelism(tp=8), ROWS_FULL), (Parallelism(tp=8, ep=8), ROWS_FULL / 8)],
)
def test_expert_rows_carry_the_full_hidden_size(par, rows_bytes):
    ops = _ops(par)
    gate_up, down, fin = ops["moe.experts.gate_up"], ops["moe.experts.down"], ops["moe.finalize"]
    assert gate_up.bytes_read - gate_up.compulsory_bytes == pytest.approx(rows_bytes)
    assert down.bytes_written == pytest.approx(rows_bytes)
    assert fin.bytes_read == pytest.approx(rows_bytes)
    assert fin.bytes_written == pytest.approx(94 * 64 * 4096 * 2)


def test_flops_and_weights_do_not_depend_on_the_split():
    tp, tep = _ops(Parallelism(tp=8)), _ops(Parallelism(tp=8, ep=8))
    for name in ("moe.experts.gate_up", "moe.experts.down"):
        assert tp[name].flops == pytest.approx(tep[name].flops)
        assert tp[name].compulsory_bytes == pytest.approx(tep[name].compulsory_bytes)
    # gate_up: 2 x 512 rows x 4096 x 3072 / 8 ranks, 94 layers
    assert tp["moe.experts.gate_up"].flops == pytest.approx(94 * 2 * 512 * 4096 * 3072 / 8)
