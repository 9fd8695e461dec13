"""The scorecard's arithmetic on synthetic backtest results, and the manifest's checks (the corpus
itself goes through the scorecard in tests/integration/test_corpus_scorecard.py)."""

from pathlib import Path

import pytest
from trainwarden.core.errors import YamlFileError
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.ops.backtest import backtest_lines
from trainwarden.policies.backtest import Backtest, Moment, backtest
from trainwarden.policies.default import default_policy

from tests.policy_helpers import Clock, policy
from trainwarden.tools.corpus import CorpusRun, StopBy, read_manifest
from trainwarden.tools.scorecard import Lines, part_lines, score_run, table, totals, totals_json


def run(label: str, stop_by: StopBy | None = None, **kw) -> CorpusRun:
    return CorpusRun(file="r.log", path=Path("r.log"), label=label, stop_by=stop_by, **kw)


def outcome(n: int, ts: float, typ: str, **data) -> Event:
    return Event(id=f"backtest/policy:{n}", type=typ, run="r", host="h", ts=ts, seq=n, data=data)


def opened(n: int, ts: float, rule: str, severity: str = "warning", reason: str = "loss=9") -> Event:
    return outcome(n, ts, t.ANOMALY_OPENED, rule=rule, severity=severity, reason=reason, values={}, remedy=None,
                   decision=None, trigger="x", policy="p")  # fmt: skip


def stop(n: int, ts: float, rule: str) -> Event:
    return outcome(n, ts, t.DECISION, decision=t.STOP, rule=rule, reason="loss=nan", trigger="x", policy="p")


def result(*, metrics: int = 10, stops: tuple[Moment, ...] = (), firings: tuple[Moment, ...] = (),
           outcomes: tuple[Event, ...] = ()) -> Backtest:  # fmt: skip
    return Backtest(policy=default_policy(), events=metrics, first_ts=0.0, last_ts=3600.0, metrics=metrics,
                    firings=list(firings), timeline=list(stops), outcomes=list(outcomes))  # fmt: skip


STOP_AT_1800 = Moment(ts=1800.0, step=50, rule="loss-nonfinite", what=t.STOP, reason="loss=nan", seq=4, epoch=2.0)


def score(r: CorpusRun, b: Backtest, *, lines: Lines | None = None, gpus: float = 1.0, interval: float = 10.0):
    return score_run(r, b, lines=lines, gpus=gpus, interval=interval)


def test_a_doomed_run_stopped_at_or_before_its_point_is_in_time_in_any_unit():
    lines = Lines(b"a\nb\nc\n")
    for by in (StopBy("step", 50), StopBy("epoch", 2.0), StopBy("line", 2), StopBy("line", 3)):
        s = score(run("STOP", by), result(stops=(STOP_AT_1800,)), lines=lines)
        assert (s.in_time, s.problems, s.stop_line) == (True, [], 2), by
    for by, late in ((StopBy("step", 49), "step 50.0 > step 49"), (StopBy("line", 1), "line 2.0 > line 1")):
        s = score(run("STOP", by), result(stops=(STOP_AT_1800,)), lines=lines)
        assert s.in_time is False
        assert s.problems == [f"stopped late: {late}"]
    missed = score(run("STOP", StopBy("step", 50)), result())
    assert (missed.in_time, missed.problems, missed.gpu_hours_saved) == (False, ["doomed run not stopped"], None)


def test_lines_count_from_one_whether_the_offset_is_before_or_after_the_newline():
    lines = Lines(b"first\nsecond\nlast")
    assert [lines.at(o) for o in (0, 5, 6, 12, 13, 17)] == [1, 1, 1, 2, 2, 3]


def test_gpu_hours_saved_from_the_manifest_hours_or_the_log_interval():
    half = result(stops=(STOP_AT_1800,))  # stopped at half of a 3600 s backtest
    assert score(run("STOP", StopBy("step", 50)), half).gpu_hours_saved == pytest.approx(0.5)
    assert score(run("STOP", StopBy("step", 50)), half, gpus=8).gpu_hours_saved == pytest.approx(4.0)
    assert score(run("STOP", StopBy("step", 50), gpus=2), half, gpus=8).gpu_hours_saved == pytest.approx(1.0)
    # the run's own lines are 60 s apart, the backtest assumed 10 s: six times as long
    assert score(run("STOP", StopBy("step", 50), interval=60), half).gpu_hours_saved == pytest.approx(3.0)
    assert score(run("STOP", StopBy("step", 50), hours=30, gpus=4), half).gpu_hours_saved == pytest.approx(60.0)


def test_a_healthy_run_fails_when_stopped_or_paged_but_a_warning_is_only_counted():
    warning = Moment(100.0, 5, "val-plateau", "warning", "flat")
    critical = Moment(200.0, 6, "grad-norm-nonfinite", "critical", "grad_norm=nan")
    quiet = score(run("NOSTOP"), result(firings=(warning,)))
    assert (quiet.anomalies, quiet.critical, quiet.problems) == (1, 0, [])
    paged = score(run("NOSTOP"), result(firings=(warning, critical), stops=(STOP_AT_1800,)))
    assert paged.problems == ["healthy run stopped (loss-nonfinite)", "1 critical alarm(s) on a healthy run"]
    tot = totals([quiet, paged])
    assert (tot.healthy, tot.healthy_stopped, tot.healthy_anomalies, tot.healthy_critical) == (2, 1, 3, 1)
    assert tot.false_alarms_per_healthy_run == 1.5
    assert (tot.failing, tot.meets_bar) == (1, False)


def test_a_confirm_stop_counts_as_a_stop_where_it_was_asked_and_is_counted_on_healthy_runs():
    guarded = policy("  - {id: high, kind: threshold, metric: loss, above: 5, decision: STOP, confirm: 10m}\n")
    clock = Clock()
    events = [clock.metric(i * 10.0, step=i, loss=9.0 if i == 3 else 1.0) for i in range(6)]
    asked = backtest(guarded, events).stop
    assert asked is not None and (asked.step, asked.rule, asked.confirm_s) == (3, "high", 600.0)
    said = backtest_lines(backtest(guarded, events), source="r.log", gpus=1)[-1]
    assert said.startswith("Would have stopped at step 3 by high (a confirm-STOP: asked here, 10m for a person")
    held = score(run("NOSTOP"), result(stops=(asked,)), lines=Lines(b"\n".join(b"l" for _ in range(9)) + b"\n"))
    assert held.problems == ["healthy run stopped (high)"]  # a confirm-STOP on a healthy run is a false stop
    at_once = score(run("NOSTOP"), result(stops=(STOP_AT_1800,)))
    quiet = score(run("NOSTOP"), result())
    doomed = score(run("STOP", StopBy("step", 3)), result(stops=(asked,)))
    assert doomed.in_time is True
    tot = totals([held, at_once, quiet, doomed])
    assert (tot.healthy, tot.healthy_stopped, tot.healthy_confirm_stops) == (3, 2, 1)
    assert totals_json(tot)["healthy_confirm_stops"] == 1
    text = "\n".join(table([held, at_once, quiet, doomed], tot))
    assert "Confirm-STOPs asked on healthy runs: 1/3 (target: at most 1 in 20)" in text
    assert "line 2 high?" in text  # the row marks a confirm-STOP
    assert "step 50 loss-nonfinite " in text  # an immediate one is not marked
    assert "confirm-STOPs on healthy 1/3" in part_lines([held, at_once, quiet, doomed])[0]


def test_a_fault_is_named_by_a_rule_its_reason_or_a_posted_message():
    oom_rule = Moment(10.0, None, "log-oom", "critical", "log: Traceback")
    traceback = Moment(10.0, None, "log-traceback", "warning", "log: Traceback (most recent call last):")
    tf_reason = Moment(10.0, None, "log-error", "critical", "log: Resource exhausted: OOM when allocating tensor")
    assert score(run("ANOMALY:oom"), result(firings=(oom_rule,))).fault_named is True
    assert score(run("ANOMALY:oom"), result(firings=(tf_reason,))).fault_named is True
    unnamed = score(run("ANOMALY:oom"), result(firings=(traceback,)))
    assert (unnamed.fault_named, unnamed.problems) == (False, ["fault 'oom' not named"])
    said = result(outcomes=(opened(1, 10.0, "log-error", reason="log: CUDA out of memory. Tried to allocate 2 GiB"),))
    assert score(run("ANOMALY:oom"), said).fault_named is True
    nccl = Moment(10.0, None, "log-error", "critical", "[Rank 3] Watchdog caught collective operation timeout")
    assert score(run("ANOMALY:nccl"), result(firings=(nccl,))).fault_named is False  # no word 'NCCL' in it
    assert score(run("ANOMALY:xid"), result(firings=(Moment(1.0, None, "gpu-xid", "critical", "Xid 79"),))).fault_named


def test_a_hang_is_named_when_said_as_one_not_when_its_heartbeat_line_is_quoted():
    """ANOMALY:hang (issue 39 item 7): `hung` or a deadlock names it; a reason that only quotes the line does not."""
    for words in ("hang: NCCL's watchdog got stuck for 10m on rank 1", "rank 3 hung in ALLREDUCE", "a deadlock"):
        said = Moment(10.0, None, "log-error", "critical", words)
        assert score(run("ANOMALY:hang"), result(firings=(said,))).fault_named is True, words
    # https://github.com/alex-petrenko/sample-factory/issues/316: the line quoted as it is names no hang
    line = "log: No heartbeat for components: RolloutWorker_w2 (552 seconds)"
    quoted = Moment(10.0, None, "log-error", "critical", line)
    assert score(run("ANOMALY:hang"), result(firings=(quoted,))).fault_named is False


def test_messages_per_episode_count_what_the_bot_would_post_at_one_moment_but_stops():
    one = score(run("ANOMALY:nan"), result(outcomes=(opened(1, 10.0, "loss-nonfinite", "critical"),
                                                     stop(2, 10.0, "loss-nonfinite"))))  # fmt: skip
    assert (one.episodes, one.messages, one.worst_episode) == (1, 1, 1)
    # two rules opening at one moment are one episode, and the bot posts it once (bot.stages.group)
    two = score(run("NOSTOP"), result(outcomes=(opened(1, 10.0, "log-oom"), opened(2, 10.0, "log-traceback"))))
    assert (two.episodes, two.messages, two.worst_episode, two.problems) == (1, 1, 1, [])
    apart = score(run("NOSTOP"), result(outcomes=(opened(1, 10.0, "log-oom"), opened(2, 20.0, "log-traceback"))))
    assert (apart.episodes, apart.messages, apart.worst_episode, apart.problems) == (2, 2, 1, [])
    resolved = outcome(3, 30.0, t.ANOMALY_RESOLVED, rule="log-oom", reason="cleared", opened_by="x", policy="p")
    again = score(run("NOSTOP"), result(outcomes=(opened(1, 10.0, "log-oom"), resolved, opened(4, 40.0, "log-oom"))))
    assert (again.episodes, again.messages, again.worst_episode) == (2, 2, 1)


def test_a_file_with_no_metric_fails_whatever_its_label_and_the_table_says_so():
    blind = score(run("NOSTOP"), result(metrics=0))
    assert blind.problems == ["no metric read"]
    good = score(run("STOP", StopBy("step", 60)), result(stops=(STOP_AT_1800,)))
    tot = totals([blind, good])
    assert (tot.no_metrics, tot.doomed, tot.stopped_in_time, tot.gpu_hours_saved) == (1, 1, 1, pytest.approx(0.5))
    text = "\n".join(table([blind, good], tot))
    assert "Files with no metric read:    1/2" in text
    assert "Doomed runs stopped in time:  1/1 (0 late)" in text
    assert "1/2 runs judged right: the policy does NOT meet the bar." in text


def test_the_manifest_reader_reports_every_problem_with_its_line(tmp_path):
    (tmp_path / "a.log").write_text("loss=1\n")
    manifest = tmp_path / "MANIFEST.yaml"
    manifest.write_text(
        "runs:\n"
        "- file: a.log\n"  # 2
        "  label: STOP\n"
        "- file: a.log\n"  # 4
        "  label: NOSTOP\n"
        "  stop_by: {line: 3}\n"
        "- file: b.log\n"  # 7
        "  label: DOOMED\n"
        "- file: a.log\n"  # 9
        "  label: STOP\n"
        "  stop_by: {line: 0, steps: 4}\n"
        "  why: fine\n"
        "  hourz: 3\n"
    )
    with pytest.raises(YamlFileError) as caught:
        read_manifest(manifest)
    got = caught.value.problems  # type: ignore[attr-defined]
    m = str(manifest)
    assert f"{m}:3:10: a STOP run needs stop_by with one of line, step or epoch, e.g. stop_by: {{line: 42}}" in got
    assert f"{m}:4:9: a.log is listed twice (first at {m}:2:3)" in got
    assert f"{m}:9:9: a.log is listed twice (first at {m}:2:3)" in got
    assert f"{m}:6:12: stop_by is for STOP runs only (this one is NOSTOP)" in got
    assert any(p.startswith(f"{m}:8:10: label 'DOOMED' must be STOP, NOSTOP or ANOMALY:<word>") for p in got)
    assert f"{m}:11:19: 'line' must be at least 1, got 0" in got
    assert any(p.startswith(f"{m}:11:22: unknown key 'steps' in stop_by") for p in got)
    assert any(p.startswith(f"{m}:13:3: unknown key 'hourz' in a run") and "did you mean 'hours'" in p for p in got)
    assert len(got) == 8


def test_the_manifest_reader_reads_a_valid_manifest(tmp_path):
    (tmp_path / "a.log").write_text("loss=1\n")
    (tmp_path / "wandb-run").mkdir()
    manifest = tmp_path / "MANIFEST.yaml"
    manifest.write_text(
        "runs:\n- {file: a.log, label: STOP, stop_by: {line: 1}, gpus: 8, hours: 2.5, useful_stop: at once}\n"
        "- {file: wandb-run, label: 'ANOMALY:oom', interval: 60}\n"
        "- {file: wandb-run/, label: STOP, stop_by: {line: 4}}\n"
    )
    with pytest.raises(YamlFileError, match=r":4:51: a W&B run directory has no lines"):
        read_manifest(manifest)
    manifest.write_text("\n".join(manifest.read_text().splitlines()[:3]) + "\n")
    first, second = read_manifest(manifest)
    assert first == CorpusRun("a.log", tmp_path / "a.log", "STOP", StopBy("line", 1), 8.0, 2.5, None,
                              f"{manifest}:2:3")  # fmt: skip
    assert (second.kind, second.fault, second.interval, second.stop_by) == ("ANOMALY", "oom", 60.0, None)


def test_a_bare_fault_excerpt_may_read_no_metric_and_must_not_read_any():
    bare = run("ANOMALY:nccl", metric_lines=False)
    assert "metrics" not in score(bare, result(metrics=0)).failed
    assert score(bare, result(metrics=3)).problems[0] == "3 metric(s) read from a file with no metric line"
    assert score(run("ANOMALY:nccl"), result(metrics=0)).problems[0] == "no metric read"
