"""Library errors name parameters; the command line shows flags (errors.with_flags,
cli.command_flags)."""

from __future__ import annotations

from infercast.cli import build_app, command_flags
from infercast.errors import with_flags


def test_named_parameters_become_the_given_flags_or_bare_names():
    message = "`ep` 4 exceeds the GPUs of a replica (tp*pp = 2); `other` stays"
    assert (
        with_flags(message, {"ep": "--ep"})
        == "--ep 4 exceeds the GPUs of a replica (tp*pp = 2); other stays"
    )
    assert with_flags("no parameter named", {"ep": "--ep"}) == "no parameter named"


def test_command_flags_are_the_invoked_commands_options_and_its_declared_aliases():
    flags = command_flags(build_app(), ["estimate", "--tp", "0"])
    assert flags["tp"] == "--tp" and flags["memory_fraction"] == "--memory-fraction"
    assert flags["batches"] == "--batch"  # commands/estimate.py PARAM_FLAGS
    assert command_flags(build_app(), ["--version"]) == {}
