"""The systemd units under deploy/: one per daemon (the worker and `up` templated), each accepted by
`systemd-analyze verify` without a warning and sandboxed to an exposure under 5 by
`systemd-analyze security --offline=yes` (the agent's unit scored 9.2 before), the agent's as-root drop-in
included. verify needs the ExecStart binary: each unit is checked from a copy whose
/opt/trainwarden/bin/trainwarden is a stand-in executable; the real path's arguments are checked against
the real `trainwarden` parser."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy_files import DEPLOY, trainwarden_accepts

ANALYZE = shutil.which("systemd-analyze")
pytestmark = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed (systemd's tools)")

BINARY = "/opt/trainwarden/bin/trainwarden"
THRESHOLD = 49  # exposure x 10: under 5 ("OK" in systemd-analyze's words)
UNITS = {  # unit -> the `trainwarden` subcommand it runs
    "trainwarden-agent.service": "agent",
    "trainwarden-dispatcher.service": "dispatcher",
    "trainwarden-worker@.service": "worker",
    "trainwarden-bot.service": "bot",
    "trainwarden-up@.service": "up",
}
HELPERS = ("trainwarden-redis-tunnel.service",)  # a GPU server's SSH tunnel to Redis (its ExecStart: ssh)
AGENT_AS_ROOT = DEPLOY / "agent-as-root.conf"
EXPOSURE = re.compile(r"Overall exposure level for \S+: (\d+\.\d)")


def stand_in(tmp_path: Path, name: str, text: str) -> Path:
    """A copy of the unit whose binary is an executable stand-in (verify checks that ExecStart exists)."""
    binary = tmp_path / "trainwarden"
    if not binary.exists():
        binary.write_text("#!/bin/sh\nexit 0\n")
        binary.chmod(0o755)
    unit = tmp_path / name
    unit.write_text(text.replace(BINARY, str(binary)))
    return unit


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run([ANALYZE, *args], capture_output=True, text=True, timeout=120, check=False)


def settings(text: str, key: str) -> list[str]:
    return [line.partition("=")[2] for line in text.splitlines() if line.startswith(f"{key}=")]


def test_every_daemon_has_a_unit() -> None:
    assert {p.name for p in DEPLOY.glob("*.service")} == {*UNITS, *HELPERS}
    for name, command in UNITS.items():
        (start,) = settings((DEPLOY / name).read_text(), "ExecStart")
        argv = shlex.split(start)
        assert argv[0] == BINARY and argv[1] == command, start
        assert trainwarden_accepts(argv[1:]), f"{name}: `trainwarden {shlex.join(argv[1:])}`"


@pytest.mark.parametrize("name", sorted([*UNITS, *HELPERS]))
def test_the_unit_verifies_without_a_warning(name: str, tmp_path: Path) -> None:
    unit = stand_in(tmp_path, name, (DEPLOY / name).read_text())
    done = analyze("verify", str(unit))
    assert done.returncode == 0 and done.stderr.strip() == "" and done.stdout.strip() == "", done.stderr
    if name.endswith("@.service"):  # and as an instance, its specifiers (%i) filled in
        instance = stand_in(tmp_path, name.replace("@.", "@1."), (DEPLOY / name).read_text())
        done = analyze("verify", str(instance))
        assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


@pytest.mark.parametrize("name", sorted([*UNITS, *HELPERS]))
def test_the_unit_is_sandboxed_to_an_exposure_under_5(name: str, tmp_path: Path) -> None:
    unit = stand_in(tmp_path, name, (DEPLOY / name).read_text())
    done = analyze("security", "--offline=yes", f"--threshold={THRESHOLD}", str(unit))
    exposure = EXPOSURE.search(done.stdout)
    assert exposure is not None, done.stdout + done.stderr
    assert done.returncode == 0 and float(exposure.group(1)) < 5, done.stdout


def test_the_agent_as_root_drop_in_verifies_and_stays_under_5(tmp_path: Path) -> None:
    """A drop-in's [Service] lines apply after the unit's: the same as appending them to it."""
    text = (DEPLOY / "trainwarden-agent.service").read_text() + "\n" + AGENT_AS_ROOT.read_text()
    unit = stand_in(tmp_path, "trainwarden-agent.service", text)
    done = analyze("verify", str(unit))
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
    done = analyze("security", "--offline=yes", f"--threshold={THRESHOLD}", str(unit))
    assert done.returncode == 0, done.stdout
    assert "User=root" in AGENT_AS_ROOT.read_text() and "CAP_KILL" in AGENT_AS_ROOT.read_text()


def test_the_old_agent_unit_would_fail_the_threshold(tmp_path: Path) -> None:
    """The check can fail: the agent's unit without its sandbox scores 9.2."""
    text = (DEPLOY / "trainwarden-agent.service").read_text()
    bare = text[: text.index("# Hardening")] + "[Install]\nWantedBy=multi-user.target\n"
    unit = stand_in(tmp_path, "trainwarden-agent.service", bare)
    done = analyze("security", "--offline=yes", f"--threshold={THRESHOLD}", str(unit))
    assert done.returncode != 0 and "9.2" in done.stdout


@pytest.mark.parametrize("name", ["trainwarden-agent.service", "trainwarden-up@.service"])
def test_units_that_watch_runs_keep_what_the_agent_needs(name: str) -> None:
    """The runs' tmux sockets are in the host's /tmp; their shared memory belongs to the same user; NVML
    opens /dev/nvidia*; signals and /proc/PID/environ of processes outside the unit."""
    text = (DEPLOY / name).read_text()
    for key in ("PrivateTmp", "RemoveIPC", "PrivateDevices", "PrivateUsers", "ProcSubset"):
        assert settings(text, key) == [], f"{name}: {key} would break the agent"
    assert settings(text, "ReadWritePaths") == ["/tmp"]
    assert not settings(text, "User")[0].startswith("trainwarden"), "the trainings' user, not a service account"


def test_each_worker_instance_beats_as_a_component_of_its_own() -> None:
    environment = settings((DEPLOY / "trainwarden-worker@.service").read_text(), "Environment")
    assert "TRAINWARDEN_HOST=%H-worker%i" in environment
