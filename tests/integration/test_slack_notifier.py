"""The notifier posting to a local Slack Web API server: threads, texts, blocks, noise control."""

import dataclasses
import json
import logging
import math

import pytest
from trainwarden.bot.config import Route
from trainwarden.bot.deadman import Deadman
from trainwarden.bot.notifier import Notifier
from trainwarden.bot.stages import SYSTEM_RUN, Pipeline
from trainwarden.events import packfiles
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.workers import context
from trainwarden.workers.chart import render_chart
from trainwarden.workers.policy_source import PolicySource
from trainwarden.workers.process import process_run

from tests.helpers import events_of, metric, nan_metric
from tests.slack_api import sink_for

pytestmark = pytest.mark.redis


def notifier(store, api, *, threshold=3, window_s=3600.0, deadman=None):
    n = Notifier(store=store, sink=sink_for(api), consumer="n1", channel="C1", host="bot",
                    pipeline=Pipeline(flap_threshold=threshold, flap_window_s=window_s), deadman=deadman)  # fmt: skip
    n.reader.ensure_group()
    return n


class Evaluator:
    """Builds the events the workers write for a run, with increasing seqs and times."""

    def __init__(self, run, host="gpu1"):
        self.run, self.host, self.seq = run, host, 0

    def __call__(self, event_type, ts=None, **data):
        self.seq += 1
        ts = ts if ts is not None else 2000.0 + self.seq
        return make_event(event_type, run=self.run, host="worker", producer=f"eval/{self.run}", seq=self.seq,
                          data={"run_host": self.host, **data}, ts=ts)  # fmt: skip

    def opened(self, rule, reason, **kw):
        return self(t.ANOMALY_OPENED, rule=rule, reason=reason, severity="warning", values={"loss": 9.0}, **kw)

    def resolved(self, rule, **kw):
        return self(t.ANOMALY_RESOLVED, rule=rule, **kw)


def drain(n):
    while n.step() > 0:
        pass


def test_one_thread_per_run_with_phone_readable_lines(store, slack_api):
    ev = Evaluator("exp01-baseline", host="ic2")
    metrics = [metric("exp01-baseline", i, step=i, loss=3.0 - i / 10) for i in range(1, 8)]
    store.append(metrics)
    store.append([
        ev(t.DECISION, decision="CONTINUE", reason="healthy", rule=None),
        ev.opened("loss-spike", "loss=9 > 2x recent average 2.4", remedy="lower the learning rate"),
        ev.opened("grad-norm", "grad_norm=180 > 100"),
        ev.resolved("grad-norm"),
        ev(t.DECISION, decision="STOP", rule="loss-nonfinite", reason="loss=nan at step 1200",
           values={"loss": math.nan, "step": 1200}),
        ev(t.EVIDENCE_BUILT, path="/ev/exp01/pack"),
        ev(t.STOP_DONE, detail="killed tmux session train-exp01-baseline"),
    ])  # fmt: skip
    n = notifier(store, slack_api)
    drain(n)

    parent, *replies = slack_api.messages
    assert parent.thread_ts is None
    headline = (
        "ANOMALY exp01-baseline@ic2: loss=9 > 2x recent average 2.4 (loss-spike, warning). "
        "Try: lower the learning rate."
    )
    assert events_of(store, "exp01-baseline", t.NOTIFICATION_SENT)[0].data["text"] == headline
    assert [r.thread_ts for r in replies] == [parent.ts] * 4
    assert [r.text for r in replies] == [
        "ANOMALY exp01-baseline@ic2: grad_norm=180 > 100 (grad-norm, warning).",
        "RESOLVED exp01-baseline@ic2: grad-norm is healthy again.",
        "STOP exp01-baseline@ic2: loss=nan at step 1200 (loss-nonfinite)",
        "STOPPED exp01-baseline@ic2: killed tmux session train-exp01-baseline. Evidence: /ev/exp01/pack",
    ]
    assert [r.broadcast for r in replies] == [False, False, True, False]  # the STOP is also in the channel
    # the resolve refreshed the parent: its first line and what is still open; the stop closed it
    assert parent.updates == [f"{headline} [open: loss-spike]", f"{headline} [run stopped]"]
    # blocks: the trend as a sparkline, buttons; the remedy once (the line says it)
    blocks = next(c for name, c in slack_api.calls if name == "chat.postMessage")["blocks"]
    context = next(b for b in blocks if b["type"] == "context")
    lines = [e["text"] for e in context["elements"]]
    assert lines[0].startswith("loss █") and lines[0].endswith("▁ (last 7: 2.3)")  # falling loss, last value
    assert not any("Try:" in line for line in lines)
    actions = next(b for b in blocks if b["type"] == "actions")
    assert [e["action_id"] for e in actions["elements"]] == ["tw_snooze", "tw_stop_run", "tw_status"]
    assert json.loads(actions["elements"][0]["value"])["rule"] == "loss-spike"
    assert "confirm" in actions["elements"][1]
    # exactly-once bookkeeping is in the run's log: one intent and one sent per message
    sent = events_of(store, "exp01-baseline", t.NOTIFICATION_SENT)
    assert len(sent) == len(events_of(store, "exp01-baseline", t.NOTIFICATION_INTENT)) == 5
    assert {e.data["ts"] for e in sent} == {m.ts for m in slack_api.messages}


def test_noise_control_dedup_snooze_inhibit(store, slack_api):
    ev = Evaluator("exp02")
    store.append([
        ev.opened("gpu-util-low", "gpu util 12% < 40% for 30m"),
        ev.opened("gpu-util-low", "again"),  # still open: no second message
        ev(t.SNOOZE_SET, rule="tokens-per-s", until=5000.0, user="U1"),
        ev.opened("tokens-per-s", "tokens/s halved"),  # snoozed
        ev.resolved("tokens-per-s"),  # its opening was not posted: no resolve either
        ev(t.DECISION, decision="STOP", rule="loss-nonfinite", reason="loss=nan"),
        ev(t.STOP_DONE, detail="killed"),
        ev.opened("run-silent", "no event for 10m"),  # follow-on symptom of the stop: inhibited
        ev.resolved("gpu-util-low"),  # inhibited too
    ])  # fmt: skip
    n = notifier(store, slack_api)
    drain(n)
    assert [m.text.split(":")[0] for m in slack_api.messages] == [
        "ANOMALY exp02@gpu1", "STOP exp02@gpu1", "STOPPED exp02@gpu1"
    ]  # fmt: skip
    assert n.suppressed == {"duplicate": 1, "snoozed": 2, "inhibited": 2}


def test_a_snooze_ends_when_it_says(store, slack_api):
    ev = Evaluator("exp03")
    store.append([ev(t.SNOOZE_SET, rule=None, until=2010.0, user="U1"), ev.opened("a", "x", ts=2005.0),
                  ev.resolved("a", ts=2006.0), ev.opened("a", "y", ts=2011.0)])  # fmt: skip
    drain(notifier(store, slack_api))
    assert slack_api.texts() == ["ANOMALY exp03@gpu1: y (a, warning)."]


def test_flood_of_flapping_anomalies_stays_bounded(store, slack_api):
    runs, rules, flips, threshold = 100, 2, 25, 3  # 100 runs x 2 rules x 25 x (open + resolve) = 10,000 events
    for r in range(runs):
        ev = Evaluator(f"flood{r:03d}")
        batch = []
        for i in range(flips):
            for rule in (f"rule{k}" for k in range(rules)):
                batch += [ev.opened(rule, f"flip {i}"), ev.resolved(rule)]
        store.append(batch)
    n = notifier(store, slack_api, threshold=threshold)
    drain(n)
    per_pair = threshold * 2 + 1  # N openings, N resolves, then one FLAPPING message
    assert len(slack_api.messages) == runs * rules * per_pair
    flapping = [m for m in slack_api.messages if m.text.startswith("FLAPPING")]
    assert len(flapping) == runs * rules
    assert flapping[0].text == (
        "FLAPPING flood000@gpu1: rule0 opened 4 times in 1h; quiet until it settles. Last: flip 3"
    )
    assert len(slack_api.parents()) == runs  # one thread per run


def test_flapping_ends_after_a_quiet_window(store, slack_api):
    ev = Evaluator("exp04")
    events = []
    for i in range(4):
        events += [ev.opened("a", f"flip {i}", ts=1000.0 + i), ev.resolved("a", ts=1000.5 + i)]
    events.append(ev.opened("a", "back after a quiet hour", ts=1003.0 + 3700))
    store.append(events)
    drain(notifier(store, slack_api, window_s=3600))
    texts = slack_api.texts()
    assert texts[6].startswith("FLAPPING")
    assert texts[7] == "ANOMALY exp04@gpu1: back after a quiet hour (a, warning)."
    assert len(texts) == 8


def test_guarded_stop_is_announced_with_buttons_and_closed_by_its_outcome(store, slack_api):
    ev = Evaluator("exp05")
    decision = ev(t.DECISION, decision="STOP", rule="val-loss-rising", reason="val loss rose 3 evals in a row",
                  confirm_s=300)  # fmt: skip
    store.append([decision])
    n = notifier(store, slack_api)
    drain(n)
    (guard,) = slack_api.messages
    assert guard.text == "Stopping exp05@gpu1 in 5m: val loss rose 3 evals in a row (val-loss-rising)"
    actions = next(b for b in guard.blocks if b["type"] == "actions")
    assert [e["action_id"] for e in actions["elements"]] == ["tw_stop_now", "tw_keep_running"]
    assert json.loads(actions["elements"][0]["value"]) == {"run": "exp05", "rule": "val-loss-rising",
                                                             "decision": decision.id}  # fmt: skip
    store.append([ev(t.STOP_CANCELLED, user="U1", rule="val-loss-rising", until=9000.0, decision=decision.id)])
    drain(n)
    assert slack_api.messages[1].text.startswith("KEPT RUNNING exp05@gpu1: <@U1> pressed Keep running")
    assert guard.updates[-1].endswith("[kept running by <@U1>]")
    assert not any(b["type"] == "actions" for b in guard.blocks)


def test_restart_resumes_from_the_checkpoint_without_reposting(store, slack_api):
    ev = Evaluator("exp06")
    store.append([ev.opened("a", "x"), ev.opened("b", "y")])
    drain(notifier(store, slack_api))
    store.append([ev.resolved("a"), ev.opened("a", "z")])
    drain(notifier(store, slack_api))  # a new process: state from the checkpoint, thread from it too
    assert len(slack_api.messages) == 4
    assert len(slack_api.parents()) == 1
    assert slack_api.messages[2].text == "RESOLVED exp06@gpu1: a is healthy again."


def test_dead_mans_switch_alerts_once_and_says_when_it_recovers(store, slack_api, r):
    now = [10_000.0]
    deadman = Deadman(store=store, host="bot", stall_s=60, clock=lambda: now[0], interval_s=0)
    n = notifier(store, slack_api, deadman=deadman)
    r.set(store.keys.heartbeat("dispatcher"), repr(now[0]))
    drain(n)
    assert slack_api.messages == []
    now[0] += 120  # the dispatcher stopped reporting
    for _ in range(3):
        drain(n)
    (alert,) = slack_api.messages
    assert alert.text == (
        "TRAINWARDEN STALLED: the dispatcher has not reported for 2m. Runs are not being watched until it recovers."
    )
    r.set(store.keys.heartbeat("dispatcher"), repr(now[0]))
    now[0] += 10
    drain(n)
    drain(n)
    assert slack_api.messages[1].text == ("TRAINWARDEN RECOVERED after 10s: the dispatcher and the workers are "
                                          "making progress again.")  # fmt: skip
    assert slack_api.messages[1].thread_ts == alert.ts
    assert [e.type for e in events_of(store, SYSTEM_RUN) if e.type.startswith("watchdog")] == [
        t.WATCHDOG_STALLED, t.WATCHDOG_RECOVERED]  # fmt: skip


def test_routes_put_each_run_in_its_channel_with_the_chart_in_the_stop_thread(store, slack_api, tmp_path, caplog):
    """Run A (launched from Slack by U0ALICE) goes to the default channel C1, run B (`llm-*`) to C2 with the
    on-call mentioned; each STOP's chart and report are shared in that run's thread. A's come from Redis
    (where the worker keeps them), B's from its pack directory (one machine); C's pack is neither, which
    costs its upload and nothing else."""
    recent = [{"step": i, "loss": 3.0 - i / 10} for i in range(1, 20)]
    png = render_chart(recent, metric="loss", trigger={"loss": math.nan, "step": 20}, title="exp-a: loss=nan")
    b_pack = tmp_path / "llm-b" / "pack"
    b_pack.mkdir(parents=True)
    (b_pack / "chart.png").write_bytes(png)
    (b_pack / "report.md").write_text("# llm-b stopped\n")
    a, b, c = Evaluator("exp-a", host="gpu1"), Evaluator("llm-b", host="dgx2"), Evaluator("exp-c")

    def stop(ev, pack_dir):
        decision = ev(t.DECISION, decision="STOP", rule="loss-nonfinite", reason="loss=nan at step 20",
                      severity="critical", values={"loss": math.nan, "step": 20})  # fmt: skip
        built = ev(t.EVIDENCE_BUILT, decision=decision.id, rule="loss-nonfinite", path=str(pack_dir),
                   files=["evidence.json", "report.md", "chart.png"], findings=None,
                   summary="FINAL_SUMMARY ...")  # fmt: skip
        return [decision, built, ev(t.STOP_DONE, detail="killed tmux session")]

    a_events = [a(t.RUN_LAUNCHED, requested_by="U0ALICE", server="gpu1", session="train-exp-a", gpus=[0]),
                a.opened("loss-spike", "loss=9 > 2x recent average 2.4"),
                *stop(a, tmp_path / "exp-a" / "gone")]  # fmt: skip
    packfiles.keep(store.redis, store.keys, run="exp-a", event_id=a_events[2].id,
                   files={"chart.png": png, "report.md": b"# exp-a stopped\n"})  # fmt: skip
    store.append(a_events)
    store.append([b.opened("grad-norm", "grad_norm=180 > 100"), *stop(b, b_pack)])
    store.append(stop(c, tmp_path / "exp-c" / "gone"))
    routes = (Route(run=("llm-*",), channel="C2", mention=("U0ONCALL",)), Route(host=("dgx*",), channel="C3"))
    n = Notifier(store=store, sink=sink_for(slack_api), consumer="n1", channel="C1", host="bot",
                 pipeline=Pipeline(flap_threshold=3, flap_window_s=3600.0), routes=routes)  # fmt: skip
    n.reader.ensure_group()
    with caplog.at_level(logging.WARNING, logger="trainwarden.bot.attachments"):
        drain(n)

    def thread_of(run):
        (parent,) = [m for m in slack_api.parents() if m.key and m.key.startswith(f"eval/{run}:")]
        return parent, [m.text for m in slack_api.replies(parent.ts)]

    a_parent, a_replies = thread_of("exp-a")
    b_parent, b_replies = thread_of("llm-b")
    c_parent, c_replies = thread_of("exp-c")
    assert (a_parent.channel, b_parent.channel, c_parent.channel) == ("C1", "C2", "C1")  # first match wins
    assert {m.channel for m in slack_api.messages if m.thread_ts == a_parent.ts} == {"C1"}
    assert {m.channel for m in slack_api.messages if m.thread_ts == b_parent.ts} == {"C2"}
    assert a_parent.text.startswith("LAUNCHED exp-a@gpu1 by <@U0ALICE>")
    assert a_replies == [
        "ANOMALY exp-a@gpu1: loss=9 > 2x recent average 2.4 (loss-spike, warning).",
        "STOP exp-a@gpu1: loss=nan at step 20 (loss-nonfinite) cc <@U0ALICE>",  # who launched it
        f"STOPPED exp-a@gpu1: killed tmux session. Evidence: {tmp_path / 'exp-a' / 'gone'}",
    ]
    assert b_parent.text == "ANOMALY llm-b@dgx2: grad_norm=180 > 100 (grad-norm, warning). [run stopped]"  # closed
    assert b_replies[0] == "STOP llm-b@dgx2: loss=nan at step 20 (loss-nonfinite) cc <@U0ONCALL>"  # the route's
    assert c_parent.text == "STOP exp-c@gpu1: loss=nan at step 20 (loss-nonfinite) [run stopped]"  # nobody to name
    assert c_replies == [f"STOPPED exp-c@gpu1: killed tmux session. Evidence: {tmp_path / 'exp-c' / 'gone'}"]
    # the uploads: files.getUploadURLExternal, the bytes POSTed to its URL, files.completeUploadExternal
    shared = [(u.channel, u.thread_ts, u.filename, u.data) for u in slack_api.uploads]
    assert shared == [
        ("C1", a_parent.ts, "chart.png", png), ("C1", a_parent.ts, "report.md", b"# exp-a stopped\n"),
        ("C2", b_parent.ts, "chart.png", png), ("C2", b_parent.ts, "report.md", b"# llm-b stopped\n"),
    ]  # fmt: skip
    comment = slack_api.uploads[2].comment
    assert comment == f"EVIDENCE llm-b@dgx2 (loss-nonfinite): chart.png, report.md. Pack: {b_pack}"
    assert slack_api.refused == []
    assert [r.getMessage() for r in caplog.records] == [
        f"no chart of exp-c to upload to Slack (not in Redis, pack {tmp_path / 'exp-c' / 'gone'} not readable here)"
    ]
    sent = [e.data for e in events_of(store, "exp-a", t.NOTIFICATION_SENT) if e.data["key"].endswith(":files")]
    assert [(d["channel"], d["thread_ts"], d["ts"]) for d in sent] == [("C1", a_parent.ts, "F00000001")]


def test_a_refused_upload_costs_the_upload_not_the_messages(store, slack_api, caplog):
    """An app installed before `files:write` was in the manifest: Slack refuses the upload (missing_scope, a
    setup error for messages); the chart is given up, recorded, and the STOPPED message still goes out."""
    png = render_chart([{"step": i, "loss": 1.0 / i} for i in range(1, 10)], metric="loss",
                       trigger={"loss": math.nan, "step": 10}, title="exp07: loss=nan")  # fmt: skip
    ev = Evaluator("exp07")
    decision = ev(t.DECISION, decision="STOP", rule="loss-nonfinite", reason="loss=nan at step 10")
    packfiles.keep(store.redis, store.keys, run="exp07", event_id=decision.id, files={"chart.png": png})
    store.append([decision, ev(t.EVIDENCE_BUILT, decision=decision.id, rule="loss-nonfinite", path="/gone",
                               files=["chart.png"], findings=None, summary="FINAL_SUMMARY ..."),
                  ev(t.STOP_DONE, detail="killed")])  # fmt: skip
    slack_api.fail("files.getUploadURLExternal", "refuse:missing_scope")
    with caplog.at_level(logging.ERROR, logger="trainwarden.bot.delivery"):
        drain(notifier(store, slack_api))
    assert [m.text.split(":")[0] for m in slack_api.messages] == ["STOP exp07@gpu1", "STOPPED exp07@gpu1"]
    assert slack_api.uploads == []
    (failed,) = events_of(store, "exp07", t.NOTIFICATION_FAILED)
    assert failed.data["key"].endswith(":files") and failed.data["error"] == "missing_scope"
    assert "files:write" in caplog.text


CRITICAL_ANOMALIES = """\
name: team
rules:
  - {id: gn-critical, kind: threshold, metric: grad_norm, above: 100, severity: critical}
  - {id: gn-warning, kind: threshold, metric: grad_norm, above: 50}
  - {id: loss-nan, kind: nonfinite, metric: loss, decision: STOP, severity: critical}
"""


def test_a_critical_anomaly_shares_its_chart_in_its_thread_unless_a_stop_pack_covers_it(
    store, slack_api, worker_ctx, tmp_path
):
    """The workers draw a critical anomaly's metric after the turn's other actions (exp-nan: after its stop) and
    keep the PNG in Redis; the bot shares it in the anomaly's thread. A warning keeps its sparkline; a run STOPped
    in the same turn has one chart, the evidence pack's, whichever critical anomalies opened beside the STOP."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(CRITICAL_ANOMALIES)
    context.install(dataclasses.replace(worker_ctx, policies=PolicySource(host="worker-test", path=policy)))
    store.append([metric("exp-gn", i, step=i, loss=2.0 / i, grad_norm=1.0 + i / 10) for i in range(1, 20)])
    store.append([metric("exp-gn", 20, step=20, loss=0.1, grad_norm=180.0)])
    store.append([metric("exp-nan", i, step=i, loss=2.0 / i, grad_norm=1.0) for i in range(1, 20)])
    store.append([nan_metric("exp-nan", 20, grad_norm=180.0)])
    for run in ("exp-gn", "exp-nan", "exp-gn"):  # a repeated job adds nothing
        process_run(run, [])

    (charted,) = events_of(store, "exp-gn", t.ANOMALY_CHARTED)
    opened = {e.data["rule"]: e for e in events_of(store, "exp-gn", t.ANOMALY_OPENED)}
    assert set(opened) == {"gn-critical", "gn-warning"}
    assert (charted.data["anomaly"], charted.data["metric"]) == (opened["gn-critical"].id, "grad_norm")
    png = packfiles.read(store.redis, store.keys, run="exp-gn", event_id=charted.data["anomaly"])["chart.png"]
    assert png.startswith(b"\x89PNG")
    nan_opened = {e.data["rule"]: e for e in events_of(store, "exp-nan", t.ANOMALY_OPENED)}
    assert set(nan_opened) == {"gn-critical", "gn-warning", "loss-nan"}
    assert events_of(store, "exp-nan", t.ANOMALY_CHARTED) == []  # gn-critical's too: the STOP's pack has the chart
    done = [e.type for e in events_of(store, "exp-nan") if e.producer.startswith("act/")]
    assert done == [t.EVIDENCE_BUILT, t.STOP_FAILED]  # (no tmux session here)
    (built,) = events_of(store, "exp-nan", t.EVIDENCE_BUILT)

    drain(notifier(store, slack_api))
    gn_parent, nan_parent = slack_api.parents()
    assert gn_parent.text == "ANOMALY exp-gn@gpu1: grad_norm=180 > 100 at step 20 (gn-critical, critical)."
    shared = [(u.thread_ts, u.filename, u.comment) for u in slack_api.uploads]
    assert shared == [
        (
            gn_parent.ts,
            "chart.png",
            f"CHART exp-gn@gpu1: grad_norm (gn-critical, critical). {opened['gn-critical'].data['reason']}",
        ),
        (
            nan_parent.ts,
            "chart.png",
            f"EVIDENCE exp-nan@gpu1 (loss-nan): chart.png, report.md. Pack: {built.data['path']}",
        ),
        (
            nan_parent.ts,
            "report.md",
            f"EVIDENCE exp-nan@gpu1 (loss-nan): chart.png, report.md. Pack: {built.data['path']}",
        ),
    ]
    assert slack_api.uploads[0].data == png


def test_a_new_launch_of_a_name_is_posted_in_a_thread_of_its_own(store, slack_api):
    ev = Evaluator("nc-long")

    def attempt(steps, loss):
        """A launch asked for in Slack, its metrics, a STOP on the loss and the stop carried out."""
        store.append([ev(t.RUN_LAUNCHED, host="gpu1", session="train-nc-long", log_path="/l", requested_by="U1",
                         attempt=1)])  # fmt: skip
        seq = ev.seq * 100
        store.append([metric("nc-long", seq + i, step=i * 10, loss=loss - i / 100) for i in range(1, steps + 1)])
        store.append([ev(t.DECISION, decision="STOP", rule="loss-spike", reason="loss spiked",
                         values={"loss": loss, "step": steps * 10}),
                      ev(t.STOP_DONE, detail="sent Ctrl-C")])  # fmt: skip
        drain(notifier(store, slack_api))

    attempt(39, 3.78)
    first_parent, *first_replies = slack_api.messages
    attempt(3, 2.5)
    second_parent, *second_replies = slack_api.messages[len(first_replies) + 1 :]
    assert [m.text.split()[0] for m in (first_parent, second_parent)] == ["LAUNCHED", "LAUNCHED"]
    assert second_parent.thread_ts is None and len(slack_api.parents()) == 2  # a new thread, not the old one
    assert [m.text.split()[0] for m in second_replies] == ["STOP", "STOPPED"]
    assert [m.thread_ts for m in second_replies] == [second_parent.ts] * 2
    assert [m.thread_ts for m in first_replies] == [first_parent.ts] * 2  # the first launch's thread as it was
    # the second STOP's trend is its own launch's three losses, not the 39 samples of the first
    stop_post = [c for name, c in slack_api.calls if name == "chat.postMessage"][-2]
    context = next(b for b in stop_post["blocks"] if b["type"] == "context")
    assert context["elements"][0]["text"].endswith("(last 3: 2.47)")
