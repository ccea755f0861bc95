"""The GPU step timer's model (``benchmarks/gpu_steps.py``), checked on the CPU: its decode step
must compute what a prefill of the longer prompt computes, or the H200 timings it produced
would time the wrong work."""

import pytest
from tests.benchmarks.helpers import load_benchmark

torch = pytest.importorskip("torch")


def _gpu_steps():
    return load_benchmark("gpu_steps")


def test_decode_after_prefill_gives_the_logits_of_the_whole_prefill():
    torch.manual_seed(0)
    assert _gpu_steps().decode_matches_prefill("cpu") < 1e-4


def test_a_wrong_cache_position_is_detected():
    gs = _gpu_steps()
    cfg = gs.json.loads((gs.MODELS_DIR / "llama-3.1-8b.json").read_text())
    model = gs.Decoder(gs.Dims.from_config(cfg, tiny=True), "cpu", torch.float32, "bf16", 0)
    model.return_logits = True
    tokens = torch.randint(0, model.d.vocab, (1, 6))
    cache = model.new_cache(1, 6)
    with torch.inference_mode():
        model.prefill(tokens[:, :5], cache)
        wrong = model.decode(tokens[:, 5], cache, 4)  # overwrites the 5th token's K/V
        whole = model.prefill(tokens)
    assert float((wrong - whole).abs().max()) > 1e-3


def test_dims_read_the_config_fields():
    gs = _gpu_steps()
    cfg = gs.json.loads((gs.MODELS_DIR / "qwen3-32b.json").read_text())
    d = gs.Dims.from_config(cfg)
    assert (d.hidden, d.layers, d.heads, d.kv_heads, d.head_dim, d.qk_norm) == (
        5120,
        64,
        64,
        8,
        128,
        True,
    )


def test_a_mixed_step_gives_the_logits_of_its_decode_and_prefill_parts():
    torch.manual_seed(0)
    assert _gpu_steps().mixed_matches_parts("cpu") < 1e-4
