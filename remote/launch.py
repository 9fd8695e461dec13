"""Launch an experiment on its server (the seed's Steps 1-3): plan, guard, preflight, write, start, record.

0. Plans: an experiment a plan holds back (a parent not finished) is refused unless forced (plan_gate.py).
1. W&B guard: an experiment that would log offline/disabled is refused (unless it opts out).
2. Preflight: every check recorded as a `preflight` event; a failure refuses the launch.
3. Write the run dir over SFTP: `run.sh` (generated, quoted), `env` (0600, secrets only).
4. Start `bash run.sh` in a detached tmux session `train-<run>`; wait for its pid.
5. Record `run.launched` and `run.started`; tell the server's agent to watch the log.
6. (`first_seconds`, the CLI) wait the first seconds for a command that fails at once.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import date
from typing import Any, cast

from trainwarden.core.redact import env_secrets, known_secrets, redact, redact_text
from trainwarden.events import types as t
from trainwarden.events.control import send_control
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.payloads import ForcedLaunch, LaunchRefusedData, PreflightData, RunLaunchedData, RunStartedData
from trainwarden.events.projection import fold
from trainwarden.events.store import EventStore, Malformed
from trainwarden.remote.errors import LaunchError, PlanHeld, PreflightFailed, WandbGuardRefused
from trainwarden.remote.first_seconds import EarlyExit, parse_watch, watch_snippet
from trainwarden.remote.fleet import Experiment, Fleet, Server
from trainwarden.remote.liveness import Ended, ended_event
from trainwarden.remote.plan import PLAN_PREFIX, fold_plan
from trainwarden.remote.plan_gate import PlanHold, governing, plan_held, plan_hold, plan_refusal
from trainwarden.remote.preflight import CheckResult, preflight_checks, run_checks, wandb_guard_result
from trainwarden.remote.runscript import (
    RunPaths,
    default_run_name,
    env_file,
    launched_with_wandb,
    run_paths,
    run_script,
    sidecar_path,
    split_env,
    tmux,
)
from trainwarden.remote.ssh import RemoteShell
from trainwarden.remote.stop import session_name

PID_WAIT_S = 15.0
PID_POLL_S = 0.02
CHECKPOINT_TOKEN = "{checkpoint}"


def start_and_report_pid(server: Server, session: str, paths: RunPaths, make_dirs: Sequence[str] = ()) -> str:
    """One round trip: make `make_dirs` (the checkpoint dir: made here, after preflight, so a refused launch
    leaves nothing), start the session, then wait on the server for the wrapper's pid file."""
    ticks = int(PID_WAIT_S / PID_POLL_S)
    pid = shlex.quote(paths.pid_file)
    made = f"mkdir -p {shlex.join(make_dirs)} || exit 1\n" if make_dirs else ""
    return (
        f"{made}"
        f"{tmux(server, 'new-session', '-d', '-s', session, 'bash', paths.script)} || exit 1\n"
        f"i=0; while [ $i -lt {ticks} ]; do [ -s {pid} ] && {{ cat {pid}; exit 0; }}; sleep {PID_POLL_S}; "
        "i=$((i+1)); done\necho NOPID\n"
    )


class RemoteLauncher:
    def __init__(
        self,
        *,
        shell: RemoteShell,
        store: EventStore,
        fleet: Fleet,
        host: str,
        secrets: Mapping[str, str],
        today: Callable[[], date] = date.today,
    ) -> None:
        self.shell = shell
        self.store = store
        self.fleet = fleet
        self.host = host
        self.secrets = dict(secrets)
        self.today = today

    def _event(self, event_type: str, run: str, data: Mapping[str, object]) -> Event:
        """`data` is the type's payload (events/payloads.py); secrets in it are masked before it is stored."""
        event = make_event(event_type, run=run, host=self.host, producer=f"launch/{self.host}", seq=time_seq(),
                           data=redact(data, [*known_secrets(), *env_secrets(self.secrets)]))  # fmt: skip
        self.store.append_one(event)
        return event

    def experiment(self, name: str) -> Experiment:
        try:
            return self.fleet.experiments[name]
        except KeyError:
            known = ", ".join(sorted(self.fleet.experiments)) or "none configured"
            raise LaunchError(f"unknown experiment {name!r}; known: {known}") from None

    def gpu_ids(self, experiment: Experiment, requested: Sequence[int] | None) -> tuple[int, ...]:
        if requested is not None:
            return tuple(requested)
        if experiment.gpu_ids is not None:
            return experiment.gpu_ids
        server = self.fleet.server_of(experiment)
        return tuple(server.gpus[: experiment.gpus]) if server.gpus else tuple(range(experiment.gpus))

    def preflight(self, experiment: Experiment, gpu_ids: Sequence[int]) -> list[CheckResult]:
        """The W&B guard (as launch applies it), then the server's checks; each check run is recorded."""
        server = self.fleet.server_of(experiment)
        results = [
            wandb_guard_result(experiment),
            *run_checks(self.shell, server, preflight_checks(experiment, server, gpu_ids, self.secrets)),
        ]
        for r in (r for r in results if not r.skipped):
            checked: PreflightData = {"experiment": experiment.name, "server": server.name, "check": r.name,
                                      "ok": r.ok, "detail": r.detail, "remedy": r.remedy}  # fmt: skip
            self._event(t.PREFLIGHT, experiment.name, checked)
        return results

    def launch(
        self,
        name: str,
        *,
        gpu_ids: Sequence[int] | None = None,
        resume: bool = False,
        attempt: int = 1,
        preflight: bool = True,
        extra: Mapping[str, Any] | None = None,
        force: bool = False,
        by: str = "",
    ) -> Event:
        """Launch `name`; returns the `run.launched` event. Raises LaunchError subclasses on refusal.

        A plan runner passes its plan in `extra`; that plan does not hold back its own launches, nor
        does any plan hold back an automatic resume (attempt > 1: its first launch was let through).
        `force` launches what a plan holds back, recorded as `forced` (`by` whom) in the launch."""
        experiment = self.experiment(name)
        server = self.fleet.server_of(experiment)
        gpus = self.gpu_ids(experiment, gpu_ids)
        extra = dict(extra or {})
        hold = self.plan_hold(name, launching=extra.get("plan")) if attempt == 1 else None
        if hold is not None:
            if not force:
                text = plan_refusal(hold, f"trainwarden launch {name} --force")
                self.refuse_held(hold, text)
                raise PlanHeld(text, run=name, hold=hold)
            forced: ForcedLaunch = {"by": by or "unknown", "at": time.time(), "plan": hold.plan,
                                    "overrode": plan_held(hold)}  # fmt: skip
            extra["forced"] = forced
        guard = wandb_guard_result(experiment)  # the same check preflight reports, before touching the server
        if not guard.ok:
            self._refuse(experiment, server, guard.name, f"{guard.detail}. Fix: {guard.remedy}")
            raise WandbGuardRefused(f"{name}: W&B offline/disabled: {guard.detail}; fix: {guard.remedy}", run=name)
        if preflight:
            failed = [r for r in self.preflight(experiment, gpus) if r.failed]
            if failed:
                text = "; ".join(f"{r.name}: {r.detail} (fix: {r.remedy})" for r in failed)
                self._refuse(experiment, server, failed[0].name, text)
                raise PreflightFailed(f"{name}: preflight failed: {text}", run=name, check=failed[0].name)
        command, checkpoint = self._command(experiment, server, resume)
        said = {"checkpoint": checkpoint} if checkpoint else {}
        return self._start(experiment, server, gpus, command, attempt=attempt, resume=resume,
                           extra={**extra, **said})  # fmt: skip

    def plan_hold(self, name: str, *, launching: str | None = None) -> PlanHold | None:
        """Why the newest plan that lists `name` holds it back now (None: it does not, or that plan is
        `launching` it itself)."""
        plans = {
            run[len(PLAN_PREFIX) :]: fold_plan(e for _, e in self.store.iter_run(run) if isinstance(e, Event))
            for run, _ in self.store.runs()
            if run.startswith(PLAN_PREFIX)
        }
        plan = governing(name, plans)
        if plan is None or plan == launching:
            return None
        parents = plans[plan].depends_on.get(name, [])
        runs = {p: fold(e for _, e in self.store.iter_run(p) if not isinstance(e, Malformed)) for p in parents}
        return plan_hold(name, plan, plans[plan], runs)

    def refuse_held(self, hold: PlanHold, text: str) -> None:
        """Record `launch.refused` (check `plan`) with the refusal as it was said."""
        experiment = self.experiment(hold.experiment)
        self._refuse(experiment, self.fleet.server_of(experiment), "plan", text)

    def first_seconds(self, launched: Event, *, within_s: float) -> EarlyExit | None:
        """Wait up to `within_s` on the server for the run's exit file; an exit then is recorded
        (`run.failed` / `run.finished`, the id the agent would use, so once) and returned."""
        data = cast(RunLaunchedData, launched.data)
        server = self.fleet.servers[data["server"]]
        pid_file = run_paths(server, launched.run).pid_file
        snippet = watch_snippet(exit_file=data["exit_file"], pid_file=pid_file, log=data["log_path"],
                                within_s=within_s)  # fmt: skip
        early = parse_watch(self.shell.run(server, snippet, timeout=within_s + 30).stdout)
        if early is not None:
            secrets = [*known_secrets(), *env_secrets(self.secrets)]
            early = replace(early, tail=tuple(redact_text(line, secrets) for line in early.tail))
            ended = Ended(exit_code=early.code, log_tail=early.tail)
            self.store.append_one(ended_event(launched.run, data, launched.seq, ended, host=self.host, now=time.time()))
        return early

    def _refuse(self, experiment: Experiment, server: Server, check: str, reason: str) -> None:
        refused: LaunchRefusedData = {"experiment": experiment.name, "server": server.name, "check": check,
                                      "reason": reason}  # fmt: skip
        self._event(t.LAUNCH_REFUSED, experiment.name, refused)

    def _command(self, experiment: Experiment, server: Server, resume: bool) -> tuple[tuple[str, ...], str | None]:
        """The argv to run, and the checkpoint a resume starts from (recorded: the RESUMED message names it)."""
        if not resume:
            return experiment.command, None
        if experiment.resume_command is None:
            raise LaunchError(
                f"{experiment.name} has no resume_command: add one to {experiment.source} to resume it",
                run=experiment.name,
            )
        command = experiment.resume_command
        if any(CHECKPOINT_TOKEN in arg for arg in command):
            latest = self.latest_checkpoint(experiment, server)
            if latest is None:
                raise LaunchError(
                    f"{experiment.name}: no checkpoint to resume from on {server.name}; launch it afresh instead",
                    run=experiment.name,
                )
            return tuple(arg.replace(CHECKPOINT_TOKEN, latest) for arg in command), latest
        return command, None

    def latest_checkpoint(self, experiment: Experiment, server: Server) -> str | None:
        if experiment.checkpoints is None:
            return None
        c = experiment.checkpoints
        done = self.shell.run(server, f"find {shlex.quote(c.dir)} -maxdepth 1 -type f -name {shlex.quote(c.pattern)} "
                                      "-printf '%T@ %p\\n'", timeout=30)  # fmt: skip
        entries = [line.split(" ", 1) for line in done.stdout.splitlines() if " " in line]
        return max(entries, key=lambda e: float(e[0]))[1] if entries else None

    def _start(self, experiment: Experiment, server: Server, gpus: Sequence[int], command: Sequence[str], *,
               attempt: int, resume: bool, extra: Mapping[str, Any]) -> Event:  # fmt: skip
        run = experiment.name
        paths = run_paths(server, run)
        session = session_name(run)
        plain, secret = split_env(experiment, self.secrets)
        wandb_name = experiment.wandb.run_name or default_run_name(
            experiment, list(self.fleet.experiments.values()), self.today()
        )
        script = run_script(experiment=experiment, server=server, run=run, gpu_ids=gpus, wandb_run_name=wandb_name,
                            plain_env=plain, command=command)  # fmt: skip
        self.shell.write_files(
            server,
            {paths.env_file: (env_file(secret).encode(), 0o600), paths.script: (script.encode(), 0o700)},
            remove=(paths.pid_file, paths.exit_file),
        )
        made = [experiment.checkpoints.dir] if experiment.checkpoints else []
        started = self.shell.run(server, start_and_report_pid(server, session, paths, made), timeout=PID_WAIT_S + 15)
        if not started.ok:
            raise LaunchError(f"tmux on {server.name} could not start session {session}: "
                              f"{(started.stderr or started.stdout).strip()}", run=run)  # fmt: skip
        pid = int(started.stdout.split()[-1]) if started.stdout.split()[-1:] != ["NOPID"] else None
        wandb = experiment.wandb
        baseline = dict(experiment.baseline) if experiment.baseline is not None else None  # a dict on the wire
        data: RunLaunchedData = {
            "experiment": run, "server": server.name, "host": server.name, "session": session,
            "tmux_socket": server.tmux_socket, "pid": pid, "log_path": paths.log, "exit_file": paths.exit_file,
            "run_dir": paths.run_dir, "workdir": experiment.code_dir or server.work_dir, "gpus": list(gpus),
            "command": list(command),
            "stop_command": list(experiment.stop_command) if experiment.stop_command else None,
            "stop_grace_s": experiment.stop_grace_s, "attempt": attempt, "resume": resume,
            "max_restarts": experiment.max_restarts, "resumable": experiment.resume_command is not None,
            "wandb": {"project": wandb.project, "group": wandb.group, "run_name": wandb_name, "entity": wandb.entity},
            "total_steps": experiment.total_steps, "epochs": experiment.epochs, "baseline": baseline,
            "config": {"source": experiment.source, "env": dict(experiment.env), "params": dict(experiment.params)},
            "owner": experiment.owner, "allow_offline_wandb": experiment.allow_offline_wandb,
        }  # fmt: skip
        uses_wandb = launched_with_wandb(list(experiment.env), wandb.project)  # a short run's too (agent.wandb_use)
        if uses_wandb is not None:
            data["uses_wandb"] = uses_wandb
        launched = self._event(t.RUN_LAUNCHED, run, {**data, **extra})  # extra: plan, requested_by
        up: RunStartedData = {"pid": pid, "server": server.name, "launch": launched.id}
        self._event(t.RUN_STARTED, run, up)
        send_control(
            self.store.redis, self.store.keys, server.name,
            {"op": "watch", "run": run, "log": paths.log, "exit_file": paths.exit_file, "session": session,
             "tmux_socket": server.tmux_socket or "", "pid": str(pid or ""), "launch": launched.id,
             "launched_at": repr(launched.ts), "workdir": experiment.code_dir or server.work_dir,
             "gpus": ",".join(str(g) for g in gpus), "metrics": sidecar_path(experiment, server, paths),
             "wandb": "1" if uses_wandb else "", "allow_offline_wandb": "1" if experiment.allow_offline_wandb else ""},
            what="register the run with the agent", run=run,
        )  # fmt: skip
        return launched
