"""The Dockerfile, read statically (no docker daemon runs builds on the CI machine): the pinned dependencies are
installed in a layer before any source is copied, the copied files are all a build needs and none is left
out of the build context, it has a health check that `trainwarden` accepts, and `demo` finds its
redis-server and tmux. deploy/constraints.txt pins every dependency of the image's extras."""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import shlex
import tomllib
from types import ModuleType

from packaging.utils import canonicalize_name

from tests.conftest import REPO
from tests.deploy_files import Instruction, dockerfile, exec_form, trainwarden_accepts

CONSTRAINTS = REPO / "deploy" / "constraints.txt"
SOURCE_ROOTS = (
    "trainwarden",
    "core",
    "sdk",
    "faults",
    "events",
    "agent",
    "policies",
    "workers",
    "bot",
    "remote",
    "archive",
    "ops",
)


def constraints_script() -> ModuleType:
    """scripts/constraints.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("constraints", REPO / "scripts" / "constraints.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pins() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = version
    return out


def copies(steps: list[Instruction]) -> list[tuple[int, list[str]]]:
    """(index, sources) of each COPY."""
    return [(i, shlex.split(s.args)[:-1]) for i, s in enumerate(steps) if s.word == "COPY"]


def pip_installs(steps: list[Instruction]) -> list[tuple[int, str]]:
    return [(i, s.args) for i, s in enumerate(steps) if s.word == "RUN" and "pip install" in s.args]


def test_dependencies_are_installed_from_the_pins_before_any_source_is_copied() -> None:
    steps = dockerfile()
    installs = pip_installs(steps)
    first_source = min(i for i, sources in copies(steps) if any(s in SOURCE_ROOTS for s in sources))
    deps = [(i, args) for i, args in installs if i < first_source]
    assert len(deps) == 1, "one layer of dependencies before the source"
    index, args = deps[0]
    assert re.search(r"-r \S*constraints\.txt", args), args
    before = [sources for i, sources in copies(steps) if i < index]
    assert before == [["deploy/constraints.txt"]], f"only the pins are copied before that layer: {before}"
    (after,) = [args for i, args in installs if i > first_source]
    assert re.search(r"-c \S*constraints\.txt", after), "the package is installed under the same pins"
    extras = re.search(r"'\.\[([a-z,]+)\]'", after)
    assert extras is not None and tuple(extras.group(1).split(",")) == constraints_script().EXTRAS


def test_every_source_a_build_needs_is_copied_and_in_the_build_context() -> None:
    copied = {source for _, sources in copies(dockerfile()) for source in sources}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needed = {"pyproject.toml", "setup.py", project["readme"], *project["license-files"]}
    setup_roots = set(re.findall(r'"trainwarden(?:\.\w+)?": "(\w+)"', (REPO / "setup.py").read_text()))
    assert setup_roots == set(SOURCE_ROOTS), "setup.py's package folders changed: copy them in the Dockerfile"
    assert needed | setup_roots <= copied, f"not copied: {(needed | setup_roots) - copied}"
    ignored = [line for line in (REPO / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
    for source in copied:
        assert (REPO / source).exists(), source
        hit = [p for p in ignored if fnmatch.fnmatch(source, p.strip("/")) or source.startswith(p.strip("/") + "/")]
        assert not hit, f"{source} is copied but .dockerignore leaves it out of the context ({hit})"


def test_the_health_check_and_the_default_command_are_real_subcommands() -> None:
    steps = {s.word: s.args for s in dockerfile()}  # the last of each
    health = steps["HEALTHCHECK"]
    options, _, command = health.partition("CMD")
    assert "--interval" in options and "--start-period" in options
    argv = exec_form(command)
    assert argv[0] == "trainwarden" and "--here" in argv and trainwarden_accepts(argv[1:]), argv
    assert exec_form(steps["ENTRYPOINT"]) == ["trainwarden"]
    assert trainwarden_accepts(exec_form(steps["CMD"]))


def test_the_demo_finds_redis_server_and_tmux_in_the_image() -> None:
    apt = [s.args for s in dockerfile() if s.word == "RUN" and "apt-get install" in s.args]
    assert apt and {"redis-server", "tmux"} <= set(apt[0].split()), "`trainwarden demo` starts both"


def test_the_pins_cover_every_dependency_of_the_image_extras() -> None:
    script = constraints_script()
    needed = script.closure()
    pinned = pins()
    assert set(needed) - set(pinned) == set(), "run `.venv/bin/python scripts/constraints.py`"
    assert canonicalize_name("trainwarden") not in pinned
    assert {"rq", "slack-bolt", "prometheus-client", "redis"} <= set(needed)  # the closure itself is not empty
    for name, requirement in needed.items():
        assert requirement.specifier.contains(pinned[name], prereleases=True), f"{name}=={pinned[name]}: {requirement}"
