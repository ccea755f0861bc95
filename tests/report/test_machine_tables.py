"""report/machine_tables.py: what ``infercast machine`` prints."""

from __future__ import annotations

RESULT = {
    "name": "cpu x",
    "profile_path": "p.toml",
    "memory_bytes": 16e9,
    "measurements": {"memory_bandwidth": {"median": 2e10, "best": 2.1e10, "runs": 3}},
}


def test_figures_in_gb_per_s_and_the_profile_path(console, capsys):
    from infercast.report.machine_tables import print_machine

    print_machine(RESULT, console)
    text = console.export_text()
    assert "20.0 GB/s" in text and "21.0 GB/s" in text
    assert "profile written to p.toml (memory 16.0 GB)" in capsys.readouterr().out
    assert "engine rates" not in text  # no --model: no engine table


def test_the_fitted_profile_line_names_the_head_format_and_the_small_curve(console, capsys):
    from infercast.cost.efficiency import EfficiencyProfile
    from infercast.report.machine_tables import print_machine

    prof = EfficiencyProfile(gemm_small_max_tokens=48, gemm_small_peak_ratio=1.9).to_dict()
    engine = {
        "profile_path": "e.toml",
        "model_config_path": "e-model.json",
        "head_weights": "int8",
        "profile": prof,
        "points": [],
    }
    print_machine({**RESULT, "engine": engine}, console)
    out = capsys.readouterr().out
    assert "LM head int8; up to 48 rows gemm_small_peak_ratio 1.900" in out
    print_machine(
        {
            **RESULT,
            "engine": {
                **engine,
                "head_weights": None,
                "profile": {**prof, "gemm_small_max_tokens": 0.0},
            },
        },
        console,
    )
    out = capsys.readouterr().out
    assert "LM head" not in out and "gemm_small" not in out
