"""The wheel: every tracked module under its `trainwarden.` name, nothing else at the top level, and an
install that a distribution with a colliding top-level name (`Events` ships `events/`) cannot break.

Offline: the wheel is built without build isolation (setuptools from the test venv) from a copy of the
tracked files, and the Events wheel comes from tests/data/wheels/.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.layout import REPO, package_roots, top_level_packages, tracked_modules

EVENTS_WHEEL = REPO / "tests" / "data" / "wheels" / "Events-0.5-py3-none-any.whl"
OFFLINE = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the git-tracked files only (what a fresh clone holds)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out)], env=OFFLINE, check=True, capture_output=True)  # fmt: skip
    (built,) = out.glob("trainwarden-*.whl")
    return built


def test_the_wheel_holds_every_tracked_module_under_trainwarden_and_nothing_else(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "/".join(module.split(".")) + ("/__init__.py" if path.name == "__init__.py" else ".py")
        for module, path in tracked_modules().items()
    }
    assert expected - names == set(), "tracked modules missing from the wheel"
    assert {name for name in names if name.endswith(".py")} == expected, "modules in the wheel that git does not track"
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == {"trainwarden"}
    assert "trainwarden/policies/default.yaml" in names
    assert set(package_roots()) >= {"trainwarden", "trainwarden.events"}
    assert top_level_packages() <= set(package_roots().values())


@pytest.fixture
def venv(tmp_path: Path) -> Iterator[Path]:
    """A plain venv (no system site-packages): what a lab's shared environment would be. The base
    dependencies (redis, yaml) are this venv's, linked in through a .pth file, since pip may not download."""
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True, capture_output=True)
    python = tmp_path / "venv" / "bin" / "python"
    deps = tmp_path / "deps"
    deps.mkdir()
    for name in ("redis", "yaml", "_yaml"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            (deps / name).symlink_to(Path(spec.origin).parent)
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    (Path(site) / "base_dependencies.pth").write_text(f"{deps}\n")
    yield python


def pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", *args], env=OFFLINE, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def installed_files(python: Path) -> dict[str, str]:
    """sha256 of every file trainwarden's install recorded, by path relative to site-packages."""
    script = (
        "import hashlib, importlib.metadata as m\n"
        "for f in m.distribution('trainwarden').files:\n"
        "    p = f.locate()\n"
        "    print(f, hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else 'MISSING')\n"
    )
    out = run(python, "-c", script)
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


def run(python: Path, *args: str) -> str:
    # from a neutral directory: the checkout on sys.path would hide what the venv really holds
    done = subprocess.run([str(python), *args], cwd=python.parent, env=OFFLINE, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_installing_and_removing_events_changes_nothing_of_trainwarden(wheel: Path, venv: Path) -> None:
    pip(venv, "install", "--no-deps", "--no-index", str(wheel))
    before = installed_files(venv)
    assert "trainwarden/events/__init__.py" in before and "MISSING" not in before.values()
    assert hashlib.sha256(EVENTS_WHEEL.read_bytes()).hexdigest().startswith("a7286af378ba")

    pip(venv, "install", "--no-deps", "--no-index", str(EVENTS_WHEEL))
    assert installed_files(venv) == before
    events_file = Path(run(venv, "-c", "import events; print(events.__file__)").strip())
    assert events_file.parts[-2:] == ("events", "__init__.py") and "trainwarden" not in events_file.parts
    assert "Events" in run(venv, "-c", "import events; print(dir(events))")  # theirs: from events.events import Events

    pip(venv, "uninstall", "-y", "Events")
    assert installed_files(venv) == before
    imported = run(venv, "-c", "import trainwarden.events.store as s; print(s.__name__)")
    assert imported.strip() == "trainwarden.events.store"
