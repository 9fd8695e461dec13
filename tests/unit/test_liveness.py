"""How the central liveness check reads a run's end, including a run that ends mid-check.

The probe command runs in a local bash with a `tmux` stand-in first on PATH, so the moment the run
ends can be placed exactly between the probes (over SSH that is a race seen once in CI).
"""

import os
import subprocess
from pathlib import Path

import pytest
from trainwarden.remote.fleet import Server
from trainwarden.remote.liveness import check_remote_run
from trainwarden.remote.ssh import CommandResult

SERVER = Server(name="gpu1", host="127.0.0.1", user="me", work_dir="/tmp")


class LocalBash:
    """A RemoteShell that runs the command here, with `bin` first on PATH."""

    def __init__(self, bin_dir: Path) -> None:
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def run(self, server, command, *, timeout=60.0, stdin=None):
        done = subprocess.run(
            ["bash", "-c", command], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        return CommandResult(done.returncode, done.stdout, done.stderr)

    def write_files(self, server, files, *, remove=()):
        raise NotImplementedError


def fake_tmux(tmp_path: Path, body: str) -> LocalBash:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tmux").write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / "tmux").chmod(0o755)
    return LocalBash(bin_dir)


@pytest.fixture
def launch(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.0\nstep=2 loss=1.9\nstep=3 boom\n")
    return {"exit_file": f"{log}.exit", "log_path": str(log), "session": "tw-exp01"}


def test_a_run_that_ends_between_the_probes_keeps_its_exit_code(tmp_path, launch):
    # has-session is where the run ends: the wrapper writes its exit file, then the session is gone
    shell = fake_tmux(tmp_path, f"printf '3\\n' > {launch['exit_file']}; exit 1")
    ended = check_remote_run(shell, SERVER, launch)
    assert ended is not None and ended.exit_code == 3
    assert ended.log_tail[-1] == "step=3 boom"


def test_a_live_session_without_an_exit_file_is_still_running(tmp_path, launch):
    assert check_remote_run(fake_tmux(tmp_path, "exit 0"), SERVER, launch) is None


def test_a_gone_session_without_an_exit_file_died_without_a_code(tmp_path, launch):
    ended = check_remote_run(fake_tmux(tmp_path, "exit 1"), SERVER, launch)
    assert ended is not None and ended.exit_code is None and not ended.ok


def test_an_exit_file_wins_over_a_session_still_closing(tmp_path, launch):
    Path(launch["exit_file"]).write_text("0\n")
    ended = check_remote_run(fake_tmux(tmp_path, "exit 0"), SERVER, launch)
    assert ended is not None and ended.ok
