"""report/catalog_tables.py: the hardware, model and engine preset tables."""

from __future__ import annotations

from infercast.report.catalog_tables import engines_table, hardware_table, models_table
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.engines import shipped_presets


def test_hardware_rows_show_memory_in_gb_and_gib_and_dense_peaks(render):
    h100 = load_hardware("h100-sxm")
    text = render(hardware_table([h100]))
    gb, gib = h100.memory_bytes / 1e9, h100.memory_bytes / 2**30
    assert f"{gb:,.0f} ({gib:,.0f})" in text
    assert f"{h100.peak_flops('bf16') / 1e12:,.0f}" in text and "h100-sxm" in text


def test_model_rows_name_the_attention_kind(render):
    text = render(models_table([load_model("llama-3.1-8b"), load_model("deepseek-v3")]))
    assert "GQA 32/8" in text  # Llama 3.1 8B: 32 query heads share 8 KV heads
    assert "MLA" in text  # DeepSeek-V3's latent attention


def test_engine_rows_say_whole_for_no_chunking(render):
    presets = shipped_presets()
    text = render(engines_table(presets))
    assert all(p.name in text for p in presets)
    assert ("whole" in text) == any(not p.chunk_size for p in presets)
