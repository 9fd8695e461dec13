"""Running a plan: fold its events, notice runs that ended, launch what is ready, until done.

Everything the runner knows is in the event log (the plan's own stream and each run's), so a
runner that is killed and started again carries on where the first one stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.payloads import PlanFinishedData, PlanStartedData, PlanStepData, RunLaunchedData
from trainwarden.events.projection import fold
from trainwarden.events.store import EventStore, Malformed
from trainwarden.remote.errors import LaunchError
from trainwarden.remote.fleet import Fleet
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.liveness import check_remote_run, ended_event
from trainwarden.remote.plan import Plan, PlanState, Step, fold_plan, is_done, next_steps, run_status
from trainwarden.remote.ssh import RemoteShell

log = logging.getLogger(__name__)

POLL_S = 2.0


class PlanRunner:
    def __init__(
        self,
        *,
        store: EventStore,
        launcher: RemoteLauncher,
        shell: RemoteShell,
        fleet: Fleet,
        host: str,
        poll_s: float = POLL_S,
        report: Callable[[str], None] = log.info,
    ) -> None:
        self.store = store
        self.launcher = launcher
        self.shell = shell
        self.fleet = fleet
        self.host = host
        self.poll_s = poll_s
        self.report = report

    def _append(self, plan: Plan, event_type: str, data: Mapping[str, object]) -> None:
        """`data` is the type's payload (events/payloads.py), built by the caller so its keys are checked."""
        self.store.append_one(make_event(event_type, run=plan.stream, host=self.host, producer=f"plan/{self.host}",
                                         seq=time_seq(), data=data))  # fmt: skip

    def state(self, plan: Plan) -> PlanState:
        return fold_plan(e for _, e in self.store.iter_run(plan.stream) if isinstance(e, Event))

    def run(self, plan: Plan, *, stop: threading.Event | None = None) -> PlanState:
        stop = stop or threading.Event()
        state = self.state(plan)
        if not state.started:
            edges = {n: list(self.fleet.experiments[n].depends_on) for n in plan.experiments}
            started: PlanStartedData = {"plan": plan.name, "experiments": list(plan.experiments), "depends_on": edges,
                                        "source": plan.source}  # fmt: skip
            self._append(plan, t.PLAN_STARTED, started)
        while not stop.is_set():
            state = self.state(plan)
            if is_done(plan, state):
                if not state.finished:
                    summary = {name: state.state_of(name) for name in plan.experiments}
                    finished: PlanFinishedData = {"plan": plan.name, "experiments": summary}
                    self._append(plan, t.PLAN_FINISHED, finished)
                    self.report(f"plan {plan.name} done: " + ", ".join(f"{k}={v}" for k, v in summary.items()))
                return self.state(plan)
            for name in plan.experiments:
                if state.state_of(name) == "launching":
                    self._adopt_or_relaunch(plan, name, state.steps[name])
            state = self.state(plan)
            statuses = {name: self._status(name, state) for name in plan.experiments
                        if state.state_of(name) == "running"}  # fmt: skip
            for step in next_steps(plan, state, statuses, self.fleet):
                self._apply(plan, step)
            stop.wait(self.poll_s)
        return self.state(plan)

    def _status(self, name: str, state: PlanState) -> str:
        """Bring the run's log up to date (did it end?) and read its status from it."""
        run = fold(e for _, e in self.store.iter_run(name) if not isinstance(e, Malformed))
        since = cast(PlanStepData, state.steps[name]).get("launch_seq")
        if run.status in ("launched", "running", "stopping") and run.launch.get("server"):
            server = self.fleet.servers.get(run.launch["server"])
            ended = check_remote_run(self.shell, server, run.launch) if server else None
            if ended is not None and run.launch_seq is not None:
                event = ended_event(name, run.launch, run.launch_seq, ended, host=self.host, now=time.time())
                self.store.append_one(event)
                run = fold(e for _, e in self.store.iter_run(name) if not isinstance(e, Malformed))
        return run_status(run, since_seq=since)

    def _apply(self, plan: Plan, step: Step) -> None:
        data: PlanStepData = {"plan": plan.name, "experiment": step.experiment, "state": step.state,
                              "reason": step.reason}  # fmt: skip
        if step.state == "running":
            launching: PlanStepData = {**data, "state": "launching", "gpus": list(step.gpus), "at": time.time()}
            self._append(plan, t.PLAN_STEP, launching)
            self._launch(plan, step.experiment, step.gpus)
            return
        self.report(f"{step.experiment}: {step.state}" + (f" ({step.reason})" if step.reason else ""))
        self._append(plan, t.PLAN_STEP, data)

    def _launch(self, plan: Plan, name: str, gpus: tuple[int, ...]) -> None:
        try:
            launched = self.launcher.launch(name, gpu_ids=gpus, extra={"plan": plan.name})
        except LaunchError as exc:
            refused: PlanStepData = {"plan": plan.name, "experiment": name, "state": "refused", "reason": str(exc)}
            self._append(plan, t.PLAN_STEP, refused)
            self.report(f"{name}: launch refused: {exc}")
            return
        self._running(plan, launched)

    def _running(self, plan: Plan, launched: Event) -> None:
        data = cast(RunLaunchedData, launched.data)
        running: PlanStepData = {
            "plan": plan.name,
            "experiment": launched.run,
            "state": "running",
            "reason": "",
            "gpus": data["gpus"],
            "server": data["server"],
            "launch_seq": launched.seq,
        }
        self._append(plan, t.PLAN_STEP, running)
        self.report(f"{launched.run}: launched on {data['server']} GPUs {data['gpus']}")

    def _adopt_or_relaunch(self, plan: Plan, name: str, latest: dict[str, Any]) -> None:
        """A previous runner died mid-launch: adopt the run it started, or launch it now."""
        step = cast(PlanStepData, latest)
        for _, e in self.store.iter_run(name):
            if not isinstance(e, Event) or e.type != t.RUN_LAUNCHED:
                continue
            if cast(RunLaunchedData, e.data).get("plan") == plan.name and e.ts >= step.get("at", 0):
                self._running(plan, e)
                return
        self._launch(plan, name, tuple(step.get("gpus", ())))
