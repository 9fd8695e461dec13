"""An invalid policy file when a worker starts: the last valid policy recorded in Redis, and the rejection said.

Real `trainwarden worker`, `dispatcher` and `bot` processes on a real Redis; the policy file is edited as
an operator would (invalid, valid, the same invalid again).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.store import EventStore
from trainwarden.workers.policy_source import PolicySource

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import evaluated_to_end, events_of, metric, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

VALID = """\
name: team
rules:
  - {id: gn-high, kind: threshold, metric: grad_norm, above: 100, decision: WAIT}
"""
INVALID = VALID + "  - {id: oops, kind: spikes, metric: loss}\n"


def rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    stat = path.stat()  # a new mtime even within the filesystem's timestamp granularity
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def policy_settings(settings_file: Path, tmp_path: Path) -> tuple[Path, Path]:
    policy = tmp_path / "policy.yaml"
    body = yaml.safe_load(settings_file.read_text())
    body["policy"] = str(policy)
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file, policy


def rejections(store: EventStore) -> list[str]:
    return [e.data["kept"] for e in events_of(store, t.SYSTEM_RUN, t.POLICY_REJECTED)]


def decided_by(store: EventStore, n: int) -> list[str]:
    return [e.data["policy"] for e in events_of(store, "exp01", t.DECISION)][:n]


def test_worker_starts_with_the_last_recorded_policy_and_announces_each_invalid_edit(
    store: EventStore, policy_settings: tuple[Path, Path], tmp_path: Path
) -> None:
    settings, policy = policy_settings
    rewrite(policy, VALID)
    recorded = PolicySource(host="earlier-worker", path=policy)  # a worker that ran before recorded it
    store.append(recorded.refresh())
    kept = recorded.policy.hash
    rewrite(policy, INVALID)

    procs = [spawn(settings, tmp_path / "dispatcher.log", "dispatcher"),
             spawn(settings, tmp_path / "worker.log", "worker")]  # fmt: skip
    try:
        wait_for(lambda: rejections(store) or procs[1].poll() is not None, timeout=30, what="the worker started")
        assert procs[1].poll() is None, (tmp_path / "worker.log").read_text()
        assert rejections(store) == [kept]
        store.append([metric("exp01", 1, step=1, loss=1.0, grad_norm=1.0)])
        assert wait_for(lambda: decided_by(store, 1), timeout=30, what="a decision") == [kept]

        rewrite(policy, VALID)  # fixed: the same policy as the one kept
        store.append([metric("exp01", 2, step=2, loss=1.0, grad_norm=1.0)])
        wait_for(lambda: evaluated_to_end(store, "exp01"), timeout=30, what="the job after the fix")
        rewrite(policy, INVALID)  # the same mistake again: a new edit, announced again
        store.append([metric("exp01", 3, step=3, loss=1.0, grad_norm=500.0)])  # above 100: WAIT
        wait_for(lambda: len(rejections(store)) == 2, timeout=30, what="the second rejection")
        assert wait_for(lambda: decided_by(store, 2)[1:], timeout=30, what="the WAIT") == [kept]
        assert all(proc.poll() is None for proc in procs)
    finally:
        for proc in procs:
            stop_process(proc)
        print((tmp_path / "worker.log").read_text(errors="replace")[-3000:])  # shown when the test fails
    assert rejections(store) == [kept, kept]
    assert [e.data["policy"] for e in events_of(store, t.SYSTEM_RUN, t.POLICY_LOADED)] == [kept]

    bot = subprocess.run(cli_argv(settings, "bot", "--burst"), capture_output=True, text=True, timeout=60, cwd=REPO,
                         check=False)  # fmt: skip
    assert bot.returncode == 0, bot.stderr
    assert bot.stdout.count("POLICY REJECTED") == 2, bot.stdout


def test_worker_refuses_to_start_when_no_valid_policy_was_ever_recorded(
    store: EventStore, policy_settings: tuple[Path, Path]
) -> None:
    settings, policy = policy_settings
    rewrite(policy, INVALID)
    worker = subprocess.run(cli_argv(settings, "worker"), capture_output=True, text=True, timeout=60, cwd=REPO,
                            check=False)  # fmt: skip
    assert worker.returncode == 1
    last = worker.stderr.strip().splitlines()[-1]
    assert last.startswith(f"trainwarden: error: the policy file {policy} is invalid and no valid policy was ever")
    assert f"{policy}:4:" in last and "unknown rule kind 'spikes'" in last
    assert events_of(store, t.SYSTEM_RUN) == []
