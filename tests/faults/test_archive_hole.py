"""An archive that trims a run's log while `replay --verify` (or check, or a backtest) reads it leaves no hole.

The reader reads the archive files the records name, then the stream after the last of them. A real
`trainwarden archive` process that commits in between (failpoint `history-before-stream` holds the real
`trainwarden replay --verify` process there) used to make the replay silently skip what it trimmed and still
print OK over part of the run; now the reader sees the new record, reads again, and verifies the whole run.
"""

from __future__ import annotations

import math

import pytest
from trainwarden.archive.archiver import Archiver
from trainwarden.archive.errors import HistoryIncomplete
from trainwarden.archive.history import READS, load_history
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.keys import Keys
from trainwarden.workers.process import process_run

from tests.conftest import spawn, stop_process
from tests.helpers import metric, wait_for
from tests.integration.test_archive import cli, snapshot

pytestmark = pytest.mark.redis

RUN = "exp01"
POINT = "history-before-stream"


def evaluated(store, first: int, last: int) -> None:
    """Metrics `first`..`last` of RUN (NaN losses among them), evaluated by the worker's code."""
    losses = {i: math.nan if i % 20 < 3 else 1.0 for i in range(first, last + 1)}
    store.append([metric(RUN, i, step=i, loss=loss, lr=1e-3) for i, loss in losses.items()])
    process_run(RUN, [])
    process_run(RUN, [])  # reads its own outputs back: the checkpoint reaches the end of the log


def test_replay_verify_over_a_log_trimmed_during_the_read_reads_it_all(store, r, settings_file, tmp_path, worker_ctx):
    store.append([make_event(t.RUN_LAUNCHED, run=RUN, host="gpu1", producer="launch", seq=1, ts=1000.0,
                             data={"session": "train-exp01", "host": "gpu1"})])  # fmt: skip
    evaluated(store, 1, 60)
    arch = tmp_path / "arch"
    assert Archiver(store, arch, host="ops1").archive(RUN).count > 0  # the run's head is in a file already
    evaluated(store, 61, 200)
    before_history = load_history(store, RUN)
    whole = snapshot(before_history.entries)
    before = cli(settings_file, "replay", RUN, "--verify")
    assert before.returncode == 0 and "OK: every decision" in before.stdout, before.stdout + before.stderr

    log = tmp_path / "replay.log"
    replay = spawn(settings_file, log, "replay", RUN, "--verify", env={"TRAINWARDEN_FAILPOINTS": POINT})
    try:
        wait_for(lambda: r.get(Keys().fault(POINT)), timeout=60, what=f"replay paused at {POINT}")
        archived = cli(settings_file, "archive", RUN, "--dir", str(arch))  # a real archive, trimming meanwhile
        assert archived.returncode == 0, archived.stdout + archived.stderr
        assert store.length(RUN) == 0 and len(list((arch / RUN).iterdir())) == 2
        r.delete(Keys().fault(POINT))
        assert replay.wait(timeout=120) == 0, log.read_text()
    finally:
        stop_process(replay)
    n = len(whole)
    read_before = f"{n} entries ({before_history.archived} from 1 archive file(s))"
    assert read_before in before.stdout
    # every entry read and re-evaluated (now all from the two files), the same outputs counted and matched
    assert log.read_text() == before.stdout.replace(read_before, f"{n} entries ({n} from 2 archive file(s))")
    assert snapshot(load_history(store, RUN).entries) == whole


def test_a_log_trimmed_under_every_read_names_the_hole(store, r, tmp_path, monkeypatch):
    """An archive committing during every try: the reader gives up naming the entries it misses, never OK."""
    arch = tmp_path / "arch"
    steps = iter(range(1, 10_000, 10))

    def archive_meanwhile(*_args: object) -> None:
        step = next(steps)
        store.append([metric(RUN, i, step=i, loss=1.0) for i in range(step, step + 10)])
        Archiver(store, arch, host="ops1").archive(RUN)

    store.append([metric(RUN, 0, step=0, loss=1.0)])
    monkeypatch.setattr("trainwarden.archive.history.pause_point", archive_meanwhile)
    with pytest.raises(HistoryIncomplete, match=rf"{READS} times in a row: entries \S+\.\.\S+ \(10 of 10, archived"):
        load_history(store, RUN)
