"""Reads of a payload through its TypedDict name keys the type has.

mypy checks `data["key"]` and every key a producer writes, but not `data.get("key")`: a misspelt
key there is typed `object` and passes. Readers use `.get` (a log may hold another version's
events), so this test reads the source: a name bound to `cast(SomePayload, ...)` (or the cast
itself) must only be looked up with keys of that payload.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from trainwarden.events import payloads

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "archive", "bot", "events", "policies", "remote", "trainwarden", "workers")
Lookup = tuple[str, int, str, str]  # file, line, payload type(s), key


def payload_keys(node: ast.expr) -> tuple[str, frozenset[str]] | None:
    """The payload type named by a cast's first argument (`p.X`, `X`, `X | Y`) and its keys."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = payload_keys(node.left), payload_keys(node.right)
        if left is None or right is None:
            return None
        return f"{left[0]} | {right[0]}", left[1] | right[1]
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    cls = getattr(payloads, name, None) if name else None
    if cls is None or not hasattr(cls, "__required_keys__"):
        return None
    return name or "", frozenset(cls.__required_keys__ | cls.__optional_keys__)


def cast_of(node: ast.expr) -> tuple[str, frozenset[str]] | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cast" and node.args:
        return payload_keys(node.args[0])
    return None


def lookups(tree: ast.AST) -> Iterator[tuple[int, tuple[str, frozenset[str]], str]]:
    """(line, payload type, key) of every literal-keyed read through a cast, per function."""
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        bound: dict[str, tuple[str, frozenset[str]]] = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Assign | ast.NamedExpr) and (typed := cast_of(node.value)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound.update({t.id: typed for t in targets if isinstance(t, ast.Name)})
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                receiver, key = node.func.value, node.args[0] if node.args else None
            elif isinstance(node, ast.Subscript):
                receiver, key = node.value, node.slice
            else:
                continue
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            typed = cast_of(receiver) or (bound.get(receiver.id) if isinstance(receiver, ast.Name) else None)
            if typed is not None:
                yield node.lineno, typed, key.value


def unknown_keys() -> tuple[list[Lookup], int]:
    bad: list[Lookup] = []
    checked = 0
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, (name, keys), key in lookups(ast.parse(path.read_text(), str(path))):
                checked += 1
                if key not in keys:
                    bad.append((str(path.relative_to(ROOT)), line, name, key))
    return bad, checked


def test_every_typed_payload_read_names_a_key_of_its_type() -> None:
    bad, checked = unknown_keys()
    assert checked > 50  # the scan finds the readers (it would pass vacuously if it found none)
    assert bad == []


def test_a_misspelt_key_is_found() -> None:
    source = "def f(event):\n    d = cast(p.StopResultData, event.data)\n    return d.get('eror'), d['detail']\n"
    found = list(lookups(ast.parse(source)))
    assert [(key, key in keys) for _, (_, keys), key in found] == [("eror", False), ("detail", True)]
