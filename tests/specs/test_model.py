"""Parameter and KV arithmetic against published, independent figures."""

from __future__ import annotations

import json

import pytest

from infercast.errors import ModelConfigError, UnknownModelError
from infercast.specs.catalog import load_model, model_names, published_sizes
from infercast.specs.hf_reader import model_from_hf_config

# Published totals that are exact counts (not nominal names like "7B").
EXACT = [
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.3-70b",
    "mixtral-8x7b",
    "deepseek-v3",
    "deepseek-r1",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "gpt-j-6b",
    "deepseek-r1-distill-llama-8b",
]
# Nominal figures ("7B", "180B", Meta's totals that include a vision tower): checked loosely.
NOMINAL_TOLERANCE = {
    "llama-2-7b": 0.05,
    "llama-7b": 0.05,
    "llama-2-70b": 0.02,
    "falcon-180b": 0.01,
    "llama-4-scout": 0.02,
    "mistral-7b": 0.01,
}


def test_all_40_presets_load():
    names = model_names()
    assert len(names) == 40
    for name in names:
        m = load_model(name)
        assert m.total_params > 0 and 0 < m.active_params <= m.total_params


@pytest.mark.parametrize("name", EXACT)
def test_exact_published_totals_within_half_percent(name):
    published = float(published_sizes()[name]["published_total_params_b"]) * 1e9
    assert load_model(name).total_params == pytest.approx(published, rel=0.005)


@pytest.mark.parametrize("name,tol", sorted(NOMINAL_TOLERANCE.items()))
def test_nominal_totals_are_close(name, tol):
    # Nominal names: "7B" is 6.74B for Llama-2-7B; Meta's Llama-4 figures include the vision
    # encoder.
    published = float(published_sizes()[name]["published_total_params_b"]) * 1e9
    assert load_model(name).total_params == pytest.approx(published, rel=tol)


def test_llama_3_1_8b_exact_count():
    # 8,030,261,248 is the count HF reports for Meta-Llama-3.1-8B.
    assert load_model("llama-3.1-8b").total_params == 8_030_261_248


def test_active_params_moe():
    # Mixtral-8x7B: 12.9B active (Mistral), with embeddings.
    assert load_model("mixtral-8x7b").active_params == pytest.approx(12.9e9, rel=0.01)
    # DeepSeek-V3: tt-metal counts 36.6B activated without the input embedding table.
    ds = load_model("deepseek-v3")
    assert ds.active_params - ds.embedding_params == pytest.approx(36.6e9, rel=0.01)
    # gpt-oss-20b: 3.6B active excludes the embedding table too.
    g = load_model("gpt-oss-20b")
    assert g.active_params - g.embedding_params == pytest.approx(3.6e9, rel=0.01)
    assert load_model("qwen3-30b-a3b").active_params == pytest.approx(3.3e9, rel=0.02)
    assert load_model("llama-4-maverick").active_params == pytest.approx(17e9, rel=0.02)


def test_kv_bytes_per_token_gqa_mqa_mla():
    # Llama-3-70B GQA, fp8 KV: 2 * 80 layers * 8 kv heads * 128 * 1 byte (the seed's figure).
    assert load_model("llama-3.1-70b").kv_bytes_per_token(1.0) == 163_840
    # Llama-3.1-8B bf16: 2 * 32 * 8 * 128 * 2 = 131,072 (128 KiB).
    assert load_model("llama-3.1-8b").kv_bytes_per_token(2.0) == 131_072
    # MHA Llama-2-7B bf16: 2 * 32 * 32 * 128 * 2 = 512 KiB.
    assert load_model("llama-2-7b").kv_bytes_per_token(2.0) == 524_288
    # DeepSeek-V3 MLA bf16: (512 latent + 64 rope) * 61 layers * 2 bytes = 70,272.
    assert load_model("deepseek-v3").kv_bytes_per_token(2.0) == 70_272
    # Falcon-180B GQA with 8 KV heads of 64.
    assert load_model("falcon-180b").kv_bytes_per_token(2.0) == 2 * 80 * 8 * 64 * 2


def test_window_aware_kv():
    g = load_model("gpt-oss-120b")  # 18 sliding (128) + 18 full layers
    per_layer = 2 * 8 * 64 * 2
    assert g.kv_bytes_for_context(4096, 2.0) == 18 * per_layer * 128 + 18 * per_layer * 4096
    mistral = load_model("mistral-7b")  # sliding window 4096 on every layer
    assert mistral.kv_bytes_for_context(10_000, 2.0) == mistral.kv_bytes_for_context(4096, 2.0)
    scout = load_model("llama-4-scout")  # chunked attention (8192) on 3 of 4 layers
    assert sum(1 for x in scout.layers if x.attention == "chunked") == 36


def test_structure_of_moe_and_mla():
    ds = load_model("deepseek-v3")
    assert ds.attention.kind == "mla" and ds.num_moe_layers == 58
    assert sum(1 for x in load_model("llama-4-maverick").layers if x.moe) == 24


def test_unknown_model_is_a_clear_error():
    with pytest.raises(UnknownModelError, match="llama-3.1-7b"):
        load_model("llama-3.1-7b")


def test_unknown_architecture_names_the_type():
    with pytest.raises(ModelConfigError, match="unsupported model_type 'mamba'"):
        model_from_hf_config({"model_type": "mamba"})


def test_missing_field_is_named():
    cfg = json.loads(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_hidden_layers": 2,
                "vocab_size": 100,
            }
        )
    )
    with pytest.raises(ModelConfigError, match="intermediate_size"):
        model_from_hf_config(cfg)


def test_config_path_and_directory(tmp_path):
    cfg = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 100,
        "intermediate_size": 128,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    by_dir = load_model(str(tmp_path))
    by_file = load_model(str(tmp_path / "config.json"))
    # 2 layers * (q 64*64 + k,v 64*32*2 + o 64*64 + mlp 3*64*128 + 2 norms) + emb + head + final
    # norm
    per_layer = 64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    assert by_dir.total_params == by_file.total_params == 2 * per_layer + 2 * 100 * 64 + 64


def test_malformed_json(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ModelConfigError, match="not valid JSON"):
        load_model(str(bad))
