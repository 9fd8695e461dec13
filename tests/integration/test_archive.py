"""`trainwarden archive` and `replay --from` on a real Redis: nothing lost, nothing doubled, even under kill -9."""

import dataclasses
import gzip
import json
import math
import socket
import subprocess
import time
from pathlib import Path

import pytest
from trainwarden.archive.archiver import FAILPOINTS, Archiver
from trainwarden.archive.errors import ArchiveBusy, ArchiveConflict, ArchiveNotFound
from trainwarden.archive.file import read_archive
from trainwarden.archive.history import load_history
from trainwarden.archive.lease import ArchiveLease
from trainwarden.archive.record import ArchiveRecord, commit_archive, read_records
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.feed import ALL_GROUPS, GroupReader
from trainwarden.workers.dispatcher import Dispatcher
from trainwarden.workers.process import process_run

from tests.conftest import REPO, cli_argv, kill_at_failpoint
from tests.helpers import metric

pytestmark = pytest.mark.redis

RUN = "exp01"


def cli(settings, *args):
    return subprocess.run(cli_argv(settings, *args), capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=120)  # fmt: skip


def snapshot(entries):
    """Comparable entries: NaN is unequal to itself, its repr is not."""
    return [(sid, repr(item)) for sid, item in entries]


def recorded_entries(store, run=RUN):
    """Every entry the run's archive records in Redis point at, read from the files."""
    return [entry for record in read_records(store.redis, store.keys, run) for entry in read_archive(Path(record.path))]


def exactly_once(store, before, run=RUN):
    """The recorded files and the stream together hold every entry of `before`, once, in order."""
    assert snapshot(recorded_entries(store, run) + list(store.iter_run(run))) == before
    assert snapshot(load_history(store, run).entries) == before


def metrics_with_garbage(store, r, n=300):
    store.append([metric(RUN, i, step=i, loss=math.nan if i % 50 == 0 else 1.0 / i, lr=1e-3) for i in range(1, n)])
    r.xadd(store.keys.log(RUN), {"e": b"{not json", "raw": b"\xff\xfe"})  # an undecodable entry, archived as is
    store.append([metric(RUN, n, step=n, loss=math.inf)])


def test_archive_then_replay_from_the_file_equals_replay_before(store, r, settings_file, tmp_path, worker_ctx):
    store.append([make_event(t.RUN_LAUNCHED, run=RUN, host="gpu1", producer="launch", seq=1, ts=1000.0,
                             data={"session": "train-exp01", "host": "gpu1"})])  # fmt: skip
    store.append([metric(RUN, i, step=i, loss=5.0 if i == 15 else 1.0, acc=math.nan if i % 7 == 0 else 0.5,
                         lr=math.inf if i == 3 else 1e-3) for i in range(1, 40)])  # fmt: skip
    r.xadd(store.keys.log(RUN), {"e": b"garbage"})
    store.append([metric(RUN, 40, step=40, loss=1.0, acc=math.nan)])
    process_run(RUN, [])
    process_run(RUN, [])  # reads its own outputs back: the checkpoint reaches the end of the log
    before = snapshot(store.iter_run(RUN))
    assert any(s for s, item in before if "anomaly.opened" in item) and any("Malformed" in item for _, item in before)
    json_before = cli(settings_file, "replay", RUN, "--json").stdout
    timeline_before = cli(settings_file, "replay", RUN).stdout.splitlines()
    filtered = ("--type", "metric", "--since", "1010", "--as-of", "1020")
    filtered_before = cli(settings_file, "replay", RUN, *filtered).stdout.splitlines()
    assert sum(" metric " in line for line in filtered_before) == 11 and "State as of" in "".join(filtered_before)
    verify_before = cli(settings_file, "replay", RUN, "--verify")
    assert verify_before.returncode == 0, verify_before.stdout + verify_before.stderr
    assert json.loads(json_before)["last_metrics"]["acc"] != json.loads(json_before)["last_metrics"]["acc"]  # NaN

    arch = tmp_path / "arch"
    done = cli(settings_file, "archive", RUN, "--dir", str(arch))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{RUN}: archived {len(before)} entries, 1 undecodable kept raw" in done.stdout
    assert "log trimmed by" in done.stdout and "x);" in done.stdout  # bytes and ratio
    assert store.length(RUN) == 0
    (path,) = (arch / RUN).iterdir()
    assert path.name.endswith(".jsonl.gz")

    assert cli(settings_file, "replay", RUN, "--json").stdout == json_before  # archived files found through Redis
    timeline = cli(settings_file, "replay", RUN).stdout.splitlines()
    assert timeline[1:] == timeline_before[1:]
    assert "from 1 archive file(s)" in timeline[0]
    assert cli(settings_file, "replay", RUN, *filtered).stdout.splitlines()[1:] == filtered_before[1:]
    verify = cli(settings_file, "replay", RUN, "--verify")
    n = len(before)
    assert f"{n} entries (0 from 0 archive file(s))" in verify_before.stdout
    assert verify.returncode == 0
    assert verify.stdout == verify_before.stdout.replace("(0 from 0 archive", f"({n} from 1 archive")

    store.append([metric(RUN, 41, step=41, loss=0.5)])  # the log goes on after the archive
    both = load_history(store, RUN)
    assert snapshot(both.entries[:-1]) == before and both.archived == len(before)
    assert both.entries[-1][1].data == {"step": 41, "loss": 0.5}

    r.flushall()  # Redis holds nothing: the run comes from the file
    alone = cli(settings_file, "replay", "--from", str(path), "--json")
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout == json_before
    offline_verify = cli(settings_file, "replay", "--from", str(arch), RUN, "--verify")
    assert offline_verify.returncode == 0 and "OK: every decision" in offline_verify.stdout


def test_replay_finds_recorded_archives_or_says_where_they_are(store, r, settings_file, tmp_path):
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(1, 21)])
    before = snapshot(store.iter_run(RUN))
    result = Archiver(store, tmp_path / "arch", host="ops1").archive(RUN)
    assert result.count == 20 and store.length(RUN) == 0
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(21, 26)])
    everything = snapshot(store.iter_run(RUN))
    history = load_history(store, RUN)
    assert snapshot(history.entries) == before + everything and history.files == (result.path,)

    moved = tmp_path / "elsewhere.jsonl.gz"
    result.path.rename(moved)
    proc = cli(settings_file, "replay", RUN)
    assert proc.returncode == 0
    assert f"note: entries {result.first}..{result.last} (20) were archived to {result.path} on ops1" in proc.stderr
    assert "which is not on this machine" in proc.stderr
    assert "Timeline of exp01 (5 of 5 entries)" in proc.stdout
    assert snapshot(load_history(store, RUN, [moved]).entries) == before + everything

    r.delete(store.keys.log(RUN))
    with pytest.raises(ArchiveNotFound, match="is archived and none of its files is here"):
        load_history(store, RUN)


@pytest.mark.parametrize("failpoint", FAILPOINTS)
def test_archive_killed_at_each_step_loses_nothing_and_a_rerun_completes(failpoint, store, r, settings_file, tmp_path):
    metrics_with_garbage(store, r)
    before = snapshot(store.iter_run(RUN))
    arch = tmp_path / "arch"
    kill_at_failpoint(settings_file, tmp_path / "doomed.log", r, failpoint, "archive", RUN, "--dir", str(arch))

    exactly_once(store, before)  # recorded files + stream, and replay, right after the kill
    left = sorted(p.name for p in (arch / RUN).iterdir())
    if failpoint in ("archive-mid-write", "archive-before-rename"):
        assert len(left) == 1 and left[0].endswith(".partial") and store.length(RUN) == len(before)
    elif failpoint == "archive-before-trim":
        assert len(left) == 1 and left[0].endswith(".jsonl.gz") and store.length(RUN) == len(before)
        assert not read_records(r, store.keys, RUN)  # written, never trimmed: its entries are still in the log
        assert snapshot(load_history(store, RUN, [arch / RUN / left[0]]).entries) == before  # not doubled
    else:
        assert store.length(RUN) == 0 and len(read_records(r, store.keys, RUN)) == 1

    rerun = cli(settings_file, "archive", RUN, "--dir", str(arch))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    if failpoint in ("archive-mid-write", "archive-before-rename"):
        assert "left by an archive that died while writing it" in rerun.stdout
    elif failpoint == "archive-before-trim":
        assert "written by an archive that died before trimming" in rerun.stdout
    else:
        assert "nothing to archive" in rerun.stdout
    (only,) = (arch / RUN).iterdir()  # no partial, no second copy
    assert [rec.name for rec in read_records(r, store.keys, RUN)] == [only.name]
    assert store.length(RUN) == 0
    assert snapshot(read_archive(only)) == before
    exactly_once(store, before)


def test_archive_stops_at_the_workers_and_the_notifiers_checkpoints(store, r, settings_file, tmp_path, worker_ctx):
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(1, 11)])
    process_run(RUN, [])
    process_run(RUN, [])
    worker_after = r.hget(store.keys.cursor(RUN), "after").decode()
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(11, 16)])  # not evaluated yet
    sids = [sid for sid, _ in store.iter_run(RUN)]
    before = snapshot(store.iter_run(RUN))
    r.hset(store.keys.notify(RUN), mapping={"after": sids[6], "state": "{}"})  # the notifier read 7 entries
    arch = tmp_path / "arch"

    first = cli(settings_file, "archive", RUN, "--dir", str(arch))
    assert first.returncode == 0, first.stderr
    assert f"stopped early, after {sids[6]}: the notifier has read the log up to {sids[6]}" in first.stdout
    assert "the later entries stay in the log (held for the notifier)" in first.stdout
    assert next(sid for sid, _ in store.iter_run(RUN)) == sids[7]
    exactly_once(store, before)

    r.hset(store.keys.notify(RUN), "after", sids[-1])
    second = Archiver(store, arch, host="ops1").archive(RUN)
    assert second.last == worker_after and second.held_by.who == "the workers"
    assert next(sid for sid, _ in store.iter_run(RUN)) == sids[sids.index(worker_after) + 1]
    exactly_once(store, before)

    r.hset(store.keys.cursor(RUN), "pending", json.dumps([{"kind": "stop", "sid": sids[-3], "id": "x"}]))
    r.hset(store.keys.cursor(RUN), "after", sids[-1])
    third = Archiver(store, arch, host="ops1").archive(RUN)
    assert third.last == sids[-4] and "pending stop action" in third.held_by.why  # the action re-reads its entry
    exactly_once(store, before)
    assert len(read_records(r, store.keys, RUN)) == 3


def test_archive_keeps_what_a_feed_group_has_not_consumed(store, r, tmp_path):
    Dispatcher(store=store, queue=None, consumer="d1").setup()  # the consumer groups exist from here on
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(1, 6)])
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(6, 11)])
    sids = [sid for sid, _ in store.iter_run(RUN)]
    before = snapshot(store.iter_run(RUN))
    archiver = Archiver(store, tmp_path / "arch", host="ops1")
    held = archiver.archive(RUN)
    assert held.path is None and held.held_by.sid == sids[0] and "not read yet" in held.held_by.why

    for group in ALL_GROUPS:  # each group takes the first batch; the notify group leaves it unacknowledged
        reader = GroupReader(r, stream=store.keys.feed(), group=group, consumer="c")
        (fid, _), *_ = reader.read(count=1)
        if group != "notify":
            reader.ack([fid])
    result = Archiver(store, tmp_path / "arch", host="ops1").archive(RUN)
    assert result.path is None and "not acknowledged by consumer group 'notify'" in result.held_by.why

    GroupReader(r, stream=store.keys.feed(), group="notify", consumer="c").ack([fid])
    result = Archiver(store, tmp_path / "arch", host="ops1").archive(RUN)
    assert (result.count, result.last) == (5, sids[4]) and "not read yet" in result.held_by.why
    exactly_once(store, before)


def test_older_than_archives_old_runs_only(store, r, settings_file, tmp_path):
    now = time.time()
    store.append([metric("old-a", i, loss=1.0) for i in range(1, 4)])  # ts 1001..1003: long ago
    store.append([make_event(t.METRIC, run="old-b", host="h", producer="p", seq=1, ts=now - 40 * 86400, data={})])
    store.append([make_event(t.METRIC, run="recent", host="h", producer="p", seq=1, ts=now - 3600, data={})])
    store.append([make_event(t.POLICY_LOADED, run=t.SYSTEM_RUN, host="h", producer="policy/x", seq=1, ts=1.0,
                             data={"policy": "x", "text": "name: x"})])  # fmt: skip
    arch = tmp_path / "arch"
    dry = cli(settings_file, "archive", "--older-than", "30d", "--dir", str(arch), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Would archive 2 of 4 runs whose last event is older than 30d" in dry.stdout
    assert "old-a: would archive 3 entries" in dry.stdout and "old-b: would archive 1 entries" in dry.stdout
    assert not arch.exists() and store.length("old-a") == 3

    done = cli(settings_file, "archive", "--older-than", "30d", "--dir", str(arch))
    assert done.returncode == 0, done.stderr
    assert "Done: archived 4 entries from 2 run(s)" in done.stdout
    assert sorted(p.name for p in arch.iterdir()) == ["old-a", "old-b"]
    assert store.length("old-a") == 0 and store.length("old-b") == 0
    assert store.length("recent") == 1 and store.length(t.SYSTEM_RUN) == 1


def test_unknown_runs_and_bad_arguments_are_refused(store, settings_file, tmp_path):
    unknown = cli(settings_file, "archive", "ghost", "--dir", str(tmp_path))
    assert unknown.returncode == 1
    assert "unknown run 'ghost': it has no events (see `trainwarden runs`)" in unknown.stderr
    neither = cli(settings_file, "archive")
    assert neither.returncode == 1 and "name the RUNs to archive, or give --older-than AGE" in neither.stderr
    bad_age = cli(settings_file, "archive", "--older-than", "30 days")
    assert bad_age.returncode == 1 and "expected an age like 30d, 12h, 90m or 3600s" in bad_age.stderr


def test_a_corrupt_archive_names_the_file_and_line(store, r, settings_file, tmp_path):
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(1, 6)])
    path = Archiver(store, tmp_path / "arch", host="ops1").archive(RUN).path
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    lines[3] = lines[3][:40] + b"\n"  # a line cut in the middle
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress(b"".join(lines)))
    proc = cli(settings_file, "replay", "--from", str(bad))
    assert proc.returncode == 1
    assert f"trainwarden: error: {bad}:4: not valid JSON" in proc.stderr


def test_a_commit_trims_nothing_when_the_head_moved_or_the_lease_is_not_its_own(store, r, tmp_path):
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(1, 6)])
    sids = [sid for sid, _ in store.iter_run(RUN)]
    lease = ArchiveLease(r, store.keys.archiving(RUN), RUN)
    lease.acquire()
    stale = ArchiveRecord(name="x.jsonl.gz", path=str(tmp_path / "x"), host="h", first=sids[1], last=sids[3], count=3,
                          malformed=0, size=1, sha256="", archived_at=0.0)  # fmt: skip
    with pytest.raises(ArchiveConflict, match=f"now starts at {sids[0]}, not at {sids[1]}"):
        commit_archive(r, store.keys, RUN, stale, lease=lease.owner)
    good = dataclasses.replace(stale, first=sids[0])
    with pytest.raises(ArchiveConflict, match=r"is held by .* now, not by this archive"):
        commit_archive(r, store.keys, RUN, good, lease="elsewhere:1:x")
    assert store.length(RUN) == 5 and not read_records(r, store.keys, RUN)
    assert commit_archive(r, store.keys, RUN, good, lease=lease.owner) == 4


def test_one_archive_of_a_run_at_a_time_and_a_dead_holder_is_taken_over(store, r, tmp_path):
    store.append([metric(RUN, i, step=i, loss=1.0) for i in range(1, 6)])
    live = ArchiveLease(r, store.keys.archiving(RUN), RUN)
    live.acquire()
    with pytest.raises(ArchiveBusy, match="another archive of 'exp01' is in progress"):
        Archiver(store, tmp_path / "arch", host="ops1").archive(RUN)
    assert store.length(RUN) == 5
    gone = subprocess.Popen(["true"])
    gone.wait()
    r.set(store.keys.archiving(RUN), f"{socket.gethostname()}:{gone.pid}:dead")  # its holder was killed
    assert Archiver(store, tmp_path / "arch", host="ops1").archive(RUN).count == 5
    assert r.get(store.keys.archiving(RUN)) is None  # released
