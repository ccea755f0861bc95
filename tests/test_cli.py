"""Every command answers a usage error (unknown option, bad value) with one message and exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infercast.cli import COMMAND_MODULES, main


def command_names() -> list[str]:
    return [name.rsplit(".", 1)[1].replace("_", "-") for name in COMMAND_MODULES]


@pytest.mark.parametrize("command", command_names())
def test_unknown_option_is_a_usage_error_not_a_traceback(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--no-such-option-xyz"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "No such option" in err and "--no-such-option-xyz" in err
    assert "Traceback" not in err


def test_bad_int_value_names_the_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--num-requests", "many"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--num-requests" in err and "infercast simulate --help" in err and "Traceback" not in err
    assert err.startswith("infercast: error: ") and len(err.strip().splitlines()) == 1


def test_unknown_command_exits_2_through_the_real_script():
    proc = subprocess.run(
        [sys.executable, "-m", "infercast.cli", "no-such-command"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "no-such-command" in proc.stderr


def test_a_plot_path_in_a_format_matplotlib_cannot_write_is_one_line(tmp_path, capsys):
    """--plot x.json used to reach matplotlib's savefig and end in a traceback."""
    import pytest

    from infercast.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--plot", str(tmp_path / "roof.json")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and err.count("\n") == 0 and "image format" in err
