"""Which package may import which: the layout shows which process runs a module only if imports follow it.

Every import in every module counts (inside functions and TYPE_CHECKING blocks too): a lazy import is
still a dependency of the package.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import pytest

from tests.layout import package_roots, top_level_packages, tracked_modules

# package -> the other packages of ours it may import. core (errors, signals, the sidecar format, tmux, the pure
# utilities) is the leaf every package may import; sdk (what a training process imports) sits on core alone; faults
# (the catalogue of fault lines, pure domain knowledge) sits on core alone too, and every package that names a fault
# (the fast lane in events, the agent's tags, the policies' rules, the bot's words) may import it; the
# composition root (trainwarden/: cli/, wiring, settings, tools/) imports anything and nothing imports it.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "sdk": {"core"},
    "faults": {"core"},
    "events": {"faults", "core"},
    "policies": {"faults", "events", "core"},
    "agent": {"faults", "events", "core"},
    "workers": {"events", "policies", "remote", "core"},
    "bot": {"ops", "faults", "events", "policies", "remote", "core"},
    "remote": {"events", "core"},
    "archive": {"events", "core"},
    "ops": {"agent", "archive", "workers", "policies", "remote", "events", "core"},
}
COMPOSITION_ROOT = "trainwarden"  # cli/, wiring, settings, tools/: they may import anything


def imported(module: str, path: Path, modules: Collection[str] = ()) -> list[tuple[int, str]]:
    """(line, absolute module name) of each import in the file; `from pkg import name` yields pkg.name
    instead of pkg where that is one of the `modules` (a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            out += [(node.lineno, name) for name in subs or [base]]
    return out


def package_of(module: str) -> str | None:
    """`events` for trainwarden.events.store; `trainwarden` for trainwarden.cli; None for not ours."""
    parts = module.split(".")
    if parts[0] != "trainwarden":
        return None
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return COMPOSITION_ROOT


def violations(package: str) -> list[str]:
    out = []
    modules = tracked_modules()
    for module, path in sorted(modules.items()):
        if package_of(module) != package:
            continue
        for line, target in imported(module, path, modules):
            other = package_of(target)
            if other is None or other == package or target == "trainwarden":
                continue
            if other == COMPOSITION_ROOT or other not in ALLOWED[package]:
                out.append(f"{path.relative_to(path.parents[1])}:{line} imports {target}")
    return sorted(set(out))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_packages_below_it(package: str) -> None:
    found = violations(package)
    allowed = ", ".join(sorted(ALLOWED[package])) or "nothing of ours"
    assert not found, f"{package} may import only {allowed}:\n" + "\n".join(found)


ENTRY = {"trainwarden.cli", "trainwarden.cli.entry"}  # the parser and `main`; cli/'s command modules are not it


def test_only_the_entry_point_imports_the_cli_and_only_the_composition_root_imports_wiring() -> None:
    bad = []
    modules = tracked_modules()
    for module, path in modules.items():
        for line, target in imported(module, path, modules):
            cli = target == "trainwarden.cli" and module != "trainwarden.__main__"
            wiring = target == "trainwarden.wiring" and package_of(module) != COMPOSITION_ROOT
            if cli or wiring:
                bad.append(f"{module}:{line} imports {target}")
    assert bad == []


def test_every_package_folder_is_a_root_with_rules() -> None:
    roots = package_roots()
    assert top_level_packages() <= set(roots.values()), "a top-level package folder that setup.py does not install"
    assert {name.removeprefix("trainwarden.") for name in roots} - {COMPOSITION_ROOT} == set(ALLOWED)


def test_the_checker_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "status.py"
    source.write_text("def f():\n    from ..workers import checkpoint\n    from . import messages\n")
    modules = {"trainwarden.workers.checkpoint", "trainwarden.bot.messages"}
    found = {target for _, target in imported("trainwarden.bot.status", source, modules)}
    assert found == modules
    assert package_of("trainwarden.workers.checkpoint") == "workers" not in ALLOWED["bot"]


# The interfaces: each parses its input, renders its output and calls the operations (ops/) between; none
# imports another. cli.entry is no interface but the process launcher (`trainwarden bot`, `trainwarden mcp`).
INTERFACES = {
    "cli": ("trainwarden.cli",),
    "mcp": ("trainwarden.mcp_server",),
    "bot": ("trainwarden.bot",),
}
LAUNCHER = "trainwarden.cli.entry"


def interface_of(module: str) -> str | None:
    for name, prefixes in INTERFACES.items():
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return name
    return None


def test_no_interface_imports_another_and_the_operations_import_none() -> None:
    bad = []
    modules = tracked_modules()
    for module, path in sorted(modules.items()):
        mine = "ops" if package_of(module) == "ops" else interface_of(module)
        if mine is None or module == LAUNCHER:
            continue
        for line, target in imported(module, path, modules):
            theirs = interface_of(target)
            if theirs is not None and theirs != mine:
                bad.append(f"{path.relative_to(path.parents[1])}:{line} ({mine}) imports {target} ({theirs})")
    assert bad == [], "the CLI, the MCP server and the bot call ops/, never each other:\n" + "\n".join(bad)


def test_core_is_the_floor_and_the_root_is_the_ceiling() -> None:
    assert all("core" in allowed for package, allowed in ALLOWED.items() if package != "core")
    assert ALLOWED["core"] == set() and ALLOWED["sdk"] == {"core"} and ALLOWED["faults"] == {"core"}
    assert ALLOWED["events"] == {"faults", "core"}, "the event log knows faults only to take them in its fast lane"
    assert package_of("trainwarden.core.errors") == "core" and package_of("trainwarden.cli.entry") == COMPOSITION_ROOT
