"""The newer Hugging Face families: shipped presets against published totals, and the readers'
structure (which layers slide, what a wrapper or an unknown type becomes)."""

from __future__ import annotations

import pytest

from infercast.errors import ModelConfigError
from infercast.specs.catalog import load_model, published_sizes
from infercast.specs.hf_reader import model_from_hf_config

# preset -> relative tolerance on the published total (PUBLISHED_SIZES.csv cites each figure).
TOTALS = {
    "gemma-2-9b": 1e-9,  # exact count from the Gemma 2 report
    "gemma-3-27b": 0.001,  # 1,416M + 25,600M (rounded to 1M in the report)
    "gemma-3-1b": 0.001,
    "qwen2.5-7b": 0.001,
    "deepseek-v2-lite": 0.005,
    "phi-3.5-moe": 0.005,
    "command-r": 0.005,
    "granite-3.0-8b": 0.015,  # the card truncates 8.17B to 8.1B
    "granite-3.1-1b-a400m": 0.03,
    "mistral-nemo-12b": 0.03,  # nominal "12B"
    "phi-4": 0.05,  # nominal "14B" (14.66B counted)
    "olmo-2-7b": 0.05,  # nominal "7B" (7.30B counted)
    "glm-4-9b": 0.05,  # nominal "9B" (9.40B counted)
}


@pytest.mark.parametrize("name,tol", sorted(TOTALS.items()))
def test_new_family_totals_match_published(name, tol):
    published = float(published_sizes()[name]["published_total_params_b"]) * 1e9
    assert load_model(name).total_params == pytest.approx(published, rel=tol)


def test_gemma_2_9b_non_embedding_count_is_exact():
    # Gemma 2 report, Table 2: 8,324,201,984 non-embedding parameters for the 9B model.
    m = load_model("gemma-2-9b")
    assert m.total_params - m.embedding_params == 8_324_201_984


def test_active_params_of_new_moe_presets():
    # DeepSeek-V2-Lite: 2.4B activated (paper), counted without the input embedding table.
    ds = load_model("deepseek-v2-lite")
    assert ds.active_params - ds.embedding_params == pytest.approx(2.4e9, rel=0.03)
    assert load_model("phi-3.5-moe").active_params == pytest.approx(6.6e9, rel=0.01)
    # Granite 1B-A400M: "400M active" on the card (428M counted with the tied embedding).
    assert load_model("granite-3.1-1b-a400m").active_params == pytest.approx(0.4e9, rel=0.08)


def test_gemma_sliding_patterns():
    g2 = load_model("gemma-2-9b")  # even layers slide (window 4096), odd layers are global
    assert [x.attention for x in g2.layers[:4]] == ["sliding", "full", "sliding", "full"]
    assert g2.norms_per_layer == 4 and g2.tie_embeddings
    g3 = load_model("gemma-3-27b")  # 5 local (1024) : 1 global
    assert sum(1 for x in g3.layers if x.attention == "full") == 62 // 6
    assert g3.layers[5].attention == "full" and g3.layers[0].window == 1024
    # Window-aware KV: at 32k context the 52 local layers hold only 1024 tokens each.
    per_layer = 2 * 16 * 128 * 2
    assert g3.kv_bytes_for_context(32768, 2.0) == (10 * 32768 + 52 * 1024) * per_layer


def test_wrapper_reads_text_config_and_reports_defaults():
    g3 = load_model("gemma-3-27b")
    assert g3.arch == "gemma3" and g3.vocab_size == 262_208
    assert any("vocab_size" in n for n in g3.notes)
    assert any("vision encoder is not counted" in n for n in g3.notes)


def test_olmo2_full_width_qk_norm():
    m = load_model("olmo-2-7b")
    # q_norm over 32*128 and k_norm over 32*128 per layer.
    assert m.attention.qk_norm_params == 4096 + 4096


def test_command_r_parallel_block_one_norm():
    m = load_model("command-r")
    assert m.parallel_block and m.norms_per_layer == 1 and m.tie_embeddings


def test_glm_has_qkv_bias_but_no_output_bias():
    a = load_model("glm-4-9b").attention
    assert a.qkv_bias and not a.o_bias and a.num_kv_heads == 2


def test_mistral_nemo_head_dim_is_read_not_derived():
    # 5120 / 32 heads would be 160; Nemo's head_dim is 128.
    assert load_model("mistral-nemo-12b").attention.head_dim == 128


def test_chatglm_remote_code_config_matches_glm_reader():
    chatglm = {
        "model_type": "chatglm",
        "hidden_size": 4096,
        "num_layers": 40,
        "num_attention_heads": 32,
        "multi_query_attention": True,
        "multi_query_group_num": 2,
        "kv_channels": 128,
        "ffn_hidden_size": 13696,
        "padded_vocab_size": 151552,
        "add_qkv_bias": True,
        "seq_length": 131072,
    }
    assert model_from_hf_config(chatglm).total_params == load_model("glm-4-9b").total_params


def test_unknown_llama_like_type_is_read_and_says_what_it_assumed():
    cfg = {
        "model_type": "exaone_like",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    m = model_from_hf_config(cfg)
    per_layer = 64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    assert m.total_params == 2 * per_layer + 2 * 100 * 64 + 64
    assert any("read as Llama-like" in n and "gated MLP" in n for n in m.notes)


@pytest.mark.parametrize(
    "cfg,why",
    [
        ({"model_type": "mamba", "hidden_size": 64, "vocab_size": 10}, "lacks num_hidden_layers"),
        ({"model_type": "t5", "is_encoder_decoder": True}, "encoder-decoder"),
        (
            {
                "model_type": "newmoe",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 100,
                "num_experts": 8,
            },
            "expert fields",
        ),
    ],
)
def test_unknown_architecture_is_one_clear_line(cfg, why):
    with pytest.raises(ModelConfigError, match=why) as err:
        model_from_hf_config(cfg, "x")
    assert "\n" not in str(err.value) and f"unsupported model_type {cfg['model_type']!r}" in str(
        err.value
    )
