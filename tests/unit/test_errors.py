"""One exception tree: every error class of trainwarden hangs under TrainwardenError, as drawn in its docstring."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest
from trainwarden.core import errors
from trainwarden.core.errors import TrainwardenError
from trainwarden.events.errors import StoreError, StoreUnavailable

from trainwarden.remedies import remedy_for

TREE_LINE = re.compile(r"^    (?P<indent>(?:[│ ]   )*)[├└]── (?P<name>\w+)\s")


def _roots() -> dict[str, str]:
    """The installed packages and their folders, from setup.py (imported from a checkout, `trainwarden`'s
    path also holds the repository root, whose tests/ and bench/ are not part of it)."""
    tree = ast.parse((Path(__file__).parents[2] / "setup.py").read_text())
    assigned = next(n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "ROOTS")
    roots: dict[str, str] = ast.literal_eval(assigned.value)
    return roots


def _modules() -> list[ModuleType]:
    names: set[str] = set()
    for package in _roots():
        names.add(package)
        module = importlib.import_module(package)
        assert module.__file__
        names.update(m.name for m in pkgutil.walk_packages([str(Path(module.__file__).parent)], f"{package}."))
    # `python -m trainwarden` runs the CLI on import; it defines nothing.
    return [importlib.import_module(name) for name in sorted(names) if not name.endswith("__main__")]


def _defined_exceptions() -> list[type[BaseException]]:
    return [
        obj
        for module in _modules()
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
    ]


def _drawn_tree() -> dict[str, str]:
    """Class name -> the name of its parent, as drawn in core/errors.py's docstring."""
    assert errors.__doc__
    lines = errors.__doc__.splitlines()
    root = next(i for i, line in enumerate(lines) if line.strip().startswith("TrainwardenError "))
    parents: dict[str, str] = {}
    path = ["TrainwardenError"]
    for line in lines[root + 1 :]:
        m = TREE_LINE.match(line)
        if m is None:
            break
        depth = len(m["indent"]) // 4 + 1
        del path[depth:]
        assert m["name"] not in parents, f"{m['name']} is drawn twice"
        parents[m["name"]] = path[-1]
        path.append(m["name"])
    return parents


CLASSES = _defined_exceptions()


def test_the_walk_finds_every_package_errors_module() -> None:
    modules = {cls.__module__ for cls in CLASSES}
    for package in ("agent", "archive", "bot", "events", "policies", "remote", "workers"):
        assert f"trainwarden.{package}.errors" in modules


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_exception_class_derives_from_the_root(cls: type[BaseException]) -> None:
    assert issubclass(cls, TrainwardenError), f"{cls.__module__}.{cls.__qualname__} does not derive from it"


def test_no_two_exception_classes_share_a_name() -> None:
    seen: dict[str, str] = {}
    for cls in CLASSES:
        where = f"{cls.__module__}.{cls.__qualname__}"
        assert cls.__name__ not in seen, f"{where} and {seen[cls.__name__]} share a name"
        seen[cls.__name__] = where


def test_no_exception_class_shadows_a_builtin() -> None:
    import builtins

    assert not [cls.__name__ for cls in CLASSES if hasattr(builtins, cls.__name__)]


def test_the_docstring_draws_every_class_under_its_real_parent() -> None:
    drawn = _drawn_tree()
    actual = {cls.__name__: cls.__bases__[0].__name__ for cls in CLASSES if cls is not TrainwardenError}
    assert drawn == actual


def test_context_is_appended_to_the_message() -> None:
    assert str(TrainwardenError("lost", run="exp01", host=None)) == "lost [run=exp01]"


def test_the_cli_says_what_to_do_about_an_event_log_error() -> None:
    assert "--redis-url" in (remedy_for(StoreUnavailable("Redis unreachable")) or "")
    assert "Redis URL" in (remedy_for(StoreError("Redis refused to append: NOAUTH")) or "")
    assert remedy_for(TrainwardenError("says it already")) is None
    first = remedy_for(StoreUnavailable("Redis unreachable"), start_here=True) or ""  # nothing may run yet here
    assert "`trainwarden up --redis` starts Redis" in first and "--redis-url" in first
    assert "up --redis" not in (remedy_for(StoreError("NOAUTH"), start_here=True) or "")  # it answers: not that
