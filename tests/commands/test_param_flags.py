"""Each command's ``PARAM_FLAGS`` (library parameter -> flag, read by ``cli.command_flags``)
names a real option of that command, so a library error is always shown with a flag the user
can type."""

from __future__ import annotations

import importlib

import pytest
import typer

from infercast.cli import COMMAND_MODULES, build_app, command_flags


def _options(command_name: str) -> set[str]:
    command = typer.main.get_command(build_app()).commands[command_name]
    return {o for p in command.params for o in p.opts if o.startswith("--")}


def _declared():
    for module in COMMAND_MODULES:
        table = getattr(importlib.import_module(module), "PARAM_FLAGS", None)
        if table is not None:
            yield module.rpartition(".")[2].replace("_", "-"), table


@pytest.mark.parametrize("name, table", list(_declared()), ids=lambda x: str(x)[:20])
def test_every_declared_flag_is_an_option_of_its_command(name, table):
    options = _options(name)
    for param, flag in table.items():
        assert param.isidentifier(), f"{name}: {param!r} is not a parameter name"
        assert flag in options, f"{name}: PARAM_FLAGS[{param!r}] = {flag!r} is no option"


def test_some_commands_declare_a_table():
    assert {name for name, _ in _declared()} >= {"estimate", "bench", "plan", "validate"}


def test_every_bench_config_field_is_shown_as_a_bench_flag():
    # commands/bench.py reports BenchConfig's validation errors by field name
    from infercast.bench.run import BenchConfig

    flags = command_flags(build_app(), ["bench"])
    options = _options("bench")
    for field in BenchConfig.model_fields:
        if field.endswith("_given"):  # set by the command, not typed by the user
            continue
        assert flags.get(field) in options, f"BenchConfig.{field} has no bench flag"


@pytest.mark.parametrize(
    "argv, line",
    [
        (  # sim/config.py names `trace`, `rate` and `concurrency`
            ["simulate", "--conversations", "builtin", "--trace", "azure-conv"],
            "drop --trace (sessions start by --request-rate, --max-concurrency or all at once)",
        ),
        (  # bench/run.py's BenchConfig rules
            ["bench", "--model", "m"],
            "give --request-rate R or --max-concurrency C",
        ),
        (  # a BenchConfig field named otherwise than its flag (PARAM_FLAGS)
            ["bench", "--model", "m", "--request-rate", "1", "--max-duration", "inf"],
            "--max-duration must be finite",
        ),
    ],
)
def test_library_errors_reach_the_user_with_the_flags_they_typed(cli, argv, line):
    code, _, err = cli(argv)
    assert code == 2 and line in err and "`" not in err
