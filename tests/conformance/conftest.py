"""The conformance suite's fixtures: the framework venvs (built by ./dev.sh), one set of real daemons on a
Redis of their own, and every case run once, in parallel; the matrix is printed at the end of the session.

The daemons end with this module: left running on the session's shared Redis, they took the jobs of every
later test (a CI run failed 41 tests that way)."""

from __future__ import annotations

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
from tests.conformance.report import matrix_text
from tests.conformance.runner import REPO, Result, run_case
from tests.conftest import spawn, stop_process
from tests.helpers import wait_for
from trainwarden.redis_server import RedisServer

PARALLEL = int(os.environ.get("CONFORMANCE_PARALLEL", "3"))
MATRIX_FILE = REPO / "build" / "conformance-matrix.md"
RESULTS: dict[str, Result] = {}
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
    redis_server = RedisServer(root / "redis").start()
    client = redis_server.client()
    store = EventStore(client, keys=Keys())
    settings = root / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": redis_server.url, "host": "testhost",
        "evidence_dir": str(root / "evidence"), "findings_file": str(root / "findings.md"),
        "agent": {"state_file": str(root / "offsets.json"), "poll_interval_s": 0.05, "process_interval_s": 0.5},
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }))  # fmt: skip
    names = ["agent", "dispatcher", "worker", "worker"]
    daemons = [spawn(settings, root / f"{n}{i}.log", n) for i, n in enumerate(names)]
    try:
        wait_for(lambda: client.exists(Keys().beat("agent@testhost")), timeout=60, what="the agent's heartbeat")
        slow_first = sorted(CASES, key=lambda c: c.scenario not in ("hang", "collective_timeout"))
        with ThreadPoolExecutor(PARALLEL) as pool:
            futures = {c.id: pool.submit(run_case, c, store=store, settings=settings, root=root) for c in slow_first}
            for case_id, future in futures.items():
                RESULTS[case_id] = future.result()
        yield RESULTS
    finally:
        for p in daemons:
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
