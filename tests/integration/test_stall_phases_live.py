"""A real process's log, read as the agent reads it and judged as the policy worker judges it, on the real clock:
a slow eval and a slow save, each longer than the step budget but within its phase's, stay quiet; the hang after
them is said within its budget, and the time from the last step to the alert is measured.

The budgets are seconds (allow_early_stop), so that the case takes ~25 s; the worker's ticks move the clock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from trainwarden.agent.logsource import RunLog
from trainwarden.agent.tail import LogTail
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.policies.engine import PolicyState, apply_policy, evaluate

from tests.policy_helpers import policy

LOOP = r"""
import sys, time
def say(s):
    print(s, flush=True)
for i in range(1, 11):
    say(f"step {i} loss {1 / i:.4f}"); time.sleep(0.2)
say("Evaluating...")
time.sleep(4.0)  # a slow eval: over the 3 s step budget, under the first eval's 6 s
say("step 10 val_loss 0.5")
for i in range(11, 21):
    say(f"step {i} loss {1 / i:.4f}"); time.sleep(0.2)
say("saving checkpoint to ckpt.pt")
time.sleep(6.0)  # a slow save: under its 8 s budget
say("checkpoint saved ckpt.pt")
for i in range(21, 26):
    say(f"step {i} loss {1 / i:.4f}"); time.sleep(0.2)
say("hang")
time.sleep(60)  # a hang after step 25
"""

RULE = ("  - {id: stalled, kind: stall, floor: 3s, busy_floor: 6s, eval_floor: 2s, save_budget: 8s,"
        " first_step_budget: 30s, decision: STOP, allow_early_stop: true}\n")  # fmt: skip


def test_a_slow_eval_and_save_stay_quiet_and_the_hang_after_them_is_said_within_its_budget(tmp_path: Path):
    pol = policy(RULE)
    state = PolicyState()
    apply_policy(pol, state)
    log = tmp_path / "train.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", LOOP], stdout=out, stderr=subprocess.STDOUT)
    reader = RunLog(run="r", host="h", tail=LogTail(log))
    last_step_at: float | None = None
    phases: list[tuple[str, bool]] = []
    alerts: list[tuple[float, str, float | None]] = []
    seq = 0
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not alerts:
            now = time.time()
            events = [i.event for i in reader.poll(now)]
            seq += 1
            events.append(make_event(t.TICK, run="r", host="h", producer="ticks", seq=seq, ts=now))
            for event in events:
                if event.type == t.METRIC and "loss" in event.data:
                    last_step_at = event.ts
                if event.type == t.PHASE:
                    phases.append((event.data["phase"], event.data["started"]))
                for o in evaluate(pol, state, event):
                    if o.type == t.ANOMALY_OPENED:
                        alerts.append((event.ts, o.data["reason"], last_step_at))
            time.sleep(0.25)
    finally:
        proc.kill()
        proc.wait()
    assert phases == [("eval", True), ("save", True), ("save", False)]
    assert len(alerts) == 1, alerts  # the eval (4 s) and the save (6 s) said nothing
    at, reason, last = alerts[0]
    assert reason.startswith("no training step for 3") and "after step 25" in reason
    assert last is not None
    latency = at - last
    print(f"\nlast step -> stall alert: {latency:.2f} s (budget 3 s, ticks every 0.25 s)")
    assert 3.0 <= latency < 4.5
