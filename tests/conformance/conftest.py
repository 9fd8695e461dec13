"""The conformance suite's fixtures: the framework venvs (built by ./dev.sh), one set of real daemons on a
Redis of their own per policy the cases run under (the default, and each tests/conformance/policies/ file a
case names: the policy is the workers' own setting), and every case run once, in parallel; the matrix and the
stall cases' timings are printed at the end of the session.

The daemons end with this module: left running on the session's shared Redis, they took the jobs of every
later test (a CI run failed 41 tests that way)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from tests.conformance.matrix import CASES, FRAMEWORKS
from tests.conformance.policy import derive
from tests.conformance.report import matrix_text, stall_text
from tests.conformance.runner import REPO, Result, run_case
from tests.conftest import spawn, stop_process
from tests.helpers import wait_for
from trainwarden.tools.redis_server import RedisServer

PARALLEL = int(os.environ.get("CONFORMANCE_PARALLEL", "3"))
MATRIX_FILE = REPO / "build" / "conformance-matrix.md"
STALLS_FILE = REPO / "build" / "conformance-stalls.md"
RESULTS: dict[str, Result] = {}
SLOW_SCENARIOS = ("hang", "slow_phases", "collective_timeout", "dataloader")  # started first: they take longest
DROPPED: dict[str, list[str]] = {}  # policy -> the overrides the installed rule kinds do not take yet
REQUIREMENTS = {".venv-frameworks": "requirements.txt", ".venv-hf4": "requirements-hf4.txt"}


def missing_venvs() -> list[str]:
    """The framework venvs not installed from their current requirements (dev.sh writes the stamp last)."""
    here = Path(__file__).resolve().parent
    out = []
    for venv in sorted({fw.venv for fw in FRAMEWORKS.values()}):
        want = hashlib.sha256((here / REQUIREMENTS[venv]).read_bytes()).hexdigest()
        stamp = REPO / venv / ".fw-stamp"
        if not stamp.exists() or stamp.read_text().strip() != want:
            out.append(f"{venv} (./dev.sh frameworks installs it; its log: {venv}.install.log)")
    return out


@pytest.fixture(scope="module")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Result]]:
    missing = missing_venvs()
    if missing:
        why = "the conformance frameworks are not installed: " + "; ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    root = tmp_path_factory.mktemp("conformance")
    with contextlib.ExitStack() as stack:
        groups = {p: stack.enter_context(daemons(root / (p or "default"), p)) for p in {c.policy for c in CASES}}
        slow_first = sorted(CASES, key=lambda c: c.scenario not in SLOW_SCENARIOS)
        with ThreadPoolExecutor(PARALLEL) as pool:
            futures = {
                c.id: pool.submit(run_case, c, store=groups[c.policy][0], settings=groups[c.policy][1], root=root)
                for c in slow_first
            }
            for case_id, future in futures.items():
                RESULTS[case_id] = future.result()
        yield RESULTS


@contextlib.contextmanager
def daemons(root: Path, policy: str | None) -> Iterator[tuple[EventStore, Path]]:
    """A Redis and the daemons (agent, dispatcher, two workers) judging under `policy` (None: the default)."""
    root.mkdir(parents=True)
    redis_server = RedisServer(root / "redis").start()
    client = redis_server.client()
    store = EventStore(client, keys=Keys())
    settings = root / "trainwarden.yaml"
    config = {
        "redis_url": redis_server.url, "host": "testhost",
        "evidence_dir": str(root / "evidence"), "findings_file": str(root / "findings.md"),
        "agent": {"state_file": str(root / "offsets.json"), "poll_interval_s": 0.05, "process_interval_s": 0.5},
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }  # fmt: skip
    if policy is not None:
        path, dropped = derive(policy, root / "policy.yaml")
        config["policy"] = str(path)
        DROPPED[policy] = dropped
    settings.write_text(yaml.safe_dump(config))
    names = ["agent", "dispatcher", "worker", "worker"]
    procs = [spawn(settings, root / f"{n}{i}.log", n) for i, n in enumerate(names)]
    try:
        wait_for(lambda: client.exists(Keys().beat("agent@testhost")), timeout=60, what="the agent's heartbeat")
        yield store, settings
    finally:
        for p in procs:
            stop_process(p)
        client.close()
        redis_server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    text = matrix_text(RESULTS)
    MATRIX_FILE.parent.mkdir(exist_ok=True)
    MATRIX_FILE.write_text(text)
    terminalreporter.section("conformance matrix (framework x scenario -> verdict, latency)")
    terminalreporter.write_line(text)
    terminalreporter.write_line(f"(written to {MATRIX_FILE})")
    stalls = stall_text(RESULTS)
    if stalls:
        STALLS_FILE.write_text(stalls)
        terminalreporter.section("stall cases (last step -> run-stalled, against the configured budget)")
        terminalreporter.write_line(stalls)
        for policy, dropped in DROPPED.items():
            if dropped:
                terminalreporter.write_line(f"policy {policy}: not taken by the installed rule kinds yet: {dropped}")
        terminalreporter.write_line(f"(written to {STALLS_FILE})")
