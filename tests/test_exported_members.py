"""The public API is what ``__all__`` says: every exported name resolves and is documented.

``infercast`` and each subpackage either declare their exports in ``__all__`` (and export
nothing else) or export nothing at all (their modules are imported by path). Each exported
class or function carries its own docstring; an exported constant is named in its package's
docstring. The top-level package docstring lists every name of the curated API.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import infercast


def _packages() -> list[str]:
    names = ["infercast"]
    names += [f"infercast.{m.name}" for m in pkgutil.iter_modules(infercast.__path__) if m.ispkg]
    return names


def _public(module: types.ModuleType) -> set[str]:
    """Names a user sees in the package's namespace (submodules are not exports)."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def _own_docstring(obj: object) -> str:
    """The object's own docstring: not inherited, not the signature a dataclass makes up."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
    doc = (doc or "").strip()
    return "" if doc.startswith(f"{obj.__name__}(") else doc


PACKAGES = _packages()


def test_every_subpackage_is_checked():
    expected = {"infercast", "infercast.cost", "infercast.plan", "infercast.sched", "infercast.sim"}
    assert expected <= set(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_exports_are_exactly_all(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if exported is None:
        assert _public(module) == set(), f"{name} exports names without an __all__"
        return
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    assert set(exported) == _public(module), f"{name}: __all__ and the namespace differ"


@pytest.mark.parametrize("name", PACKAGES)
def test_each_export_resolves_and_is_documented(name):
    module = importlib.import_module(name)
    for member in getattr(module, "__all__", ()):
        obj = getattr(module, member)  # AttributeError: listed but not defined
        if inspect.isclass(obj) or inspect.isroutine(obj):
            where = obj.__module__
            assert where.startswith("infercast."), f"{name}.{member} re-exports {where}"
            assert _own_docstring(obj), f"{name}.{member} has no docstring"
        else:
            doc = module.__doc__ or ""
            assert f"``{member}``" in doc, f"{name}.{member}: name it in {name}'s docstring"


def test_the_package_docstring_lists_the_curated_api():
    for member in infercast.__all__:
        assert member in infercast.__doc__, f"infercast.{member} is exported but not listed"
    assert infercast.__version__
