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
