"""The repository's package layout as setup.py declares it: which folder installs as which package."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def package_roots() -> dict[str, str]:
    """setup.py's ROOTS (package name -> folder), read without running setup.py."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROOTS" for t in node.targets):
            roots = ast.literal_eval(node.value)
            assert isinstance(roots, dict)
            return {str(k): str(v) for k, v in roots.items()}
    raise AssertionError("setup.py has no ROOTS = {...} mapping")


def tracked_modules() -> dict[str, Path]:
    """Every git-tracked .py under a root folder, by its installed module name (`trainwarden.events.store`)."""
    folders = {folder: name for name, folder in package_roots().items()}
    listed = subprocess.run(["git", "ls-files", "-z", "--", "*.py"], cwd=REPO, capture_output=True, check=True)
    out: dict[str, Path] = {}
    for rel in listed.stdout.decode().split("\0"):
        if not rel:
            continue
        parts = Path(rel).with_suffix("").parts
        if len(parts) < 2 or parts[0] not in folders:
            continue
        dotted = [folders[parts[0]], *parts[1:]]
        if dotted[-1] == "__init__":
            dotted.pop()
        out[".".join(dotted)] = REPO / rel
    return out


def top_level_packages() -> set[str]:
    """Top-level folders of the checkout that hold an __init__.py (tests excluded)."""
    return {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests"}
