"""`trainwarden demo`: the whole path on one machine, with real processes and nothing to set up.

A private redis-server, a synthetic training run in tmux whose loss turns NaN, and the agent,
dispatcher and RQ worker as separate processes, exactly as they are deployed. The console
notifier prints what Slack would receive.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO, cast

import yaml

from trainwarden import wiring, writable
from trainwarden.bot.sink import ConsoleSink
from trainwarden.core.errors import DemoError
from trainwarden.core.tmux import tmux_argv
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.projection import RunState, fold
from trainwarden.events.store import EventStore, Malformed
from trainwarden.ops import render
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget
from trainwarden.settings import load_settings
from trainwarden.tools.redis_server import RedisServer

RUN = "demo-nan"
PROCESSES = ("agent", "dispatcher", "worker")
DEMO_TIMEOUT_S = 60.0  # seconds the demo waits for the stop before failing
KEPT_EVIDENCE = "trainwarden-demo-evidence"  # where the evidence pack outlives the demo: in the directory it ran in


class Demo:
    def __init__(self, *, nan_at: int, workdir: Path, out: TextIO, evidence_dir: Path) -> None:
        self.nan_at = nan_at
        self.workdir = workdir
        self.evidence_dir = evidence_dir  # written there at once: every line that names a pack names one that stays
        self.out = out
        self.tmux_socket = f"trainwarden-demo-{os.getpid()}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.stop_notifier = threading.Event()

    def say(self, text: str) -> None:
        print(f"==> {text}", file=self.out, flush=True)

    def run(self) -> int:
        self.say(f"trainwarden demo in {self.workdir}")
        self.say("starting a private redis-server (AOF on) on a free loopback port")
        with RedisServer(self.workdir / "redis") as server:
            config = self._write_config(server.url)
            settings = load_settings(config, env={})
            store = wiring.store(settings)
            try:
                return self._run(settings_path=config, store=store, settings_host=settings.host)
            finally:
                self._teardown()

    def _write_config(self, redis_url: str) -> Path:
        config = self.workdir / "trainwarden.yaml"
        body = {
            "redis_url": redis_url,
            "host": socket.gethostname(),
            "data_dir": str(self.workdir),  # findings.md, the agent's state: never the user's data dir
            "evidence_dir": str(self.evidence_dir),
            "agent": {"poll_interval_s": 0.02, "watch": [{"run": RUN, "log": "train.log"}]},
            "workers": {"reclaim_idle_s": 5},
        }  # fmt: skip
        config.write_text(yaml.safe_dump(body, sort_keys=False))
        return config

    def _run(self, *, settings_path: Path, store: EventStore, settings_host: str) -> int:
        for name in PROCESSES:
            self._spawn(name, settings_path)
        self.say(f"started {', '.join(PROCESSES)} as separate processes (logs in {self.workdir / 'logs'})")
        settings = load_settings(settings_path, env={})
        notifier = wiring.notifier(settings, ConsoleSink(self.out))
        thread = threading.Thread(target=notifier.run, kwargs={"stop": self.stop_notifier}, daemon=True)
        thread.start()
        self.say("console notifier on: lines below marked [time] are what Slack would show")

        spec = LaunchSpec(
            run=RUN,
            command=(sys.executable, "-m", "trainwarden.tools.demo_train", "--nan-at", str(self.nan_at)),
            workdir=self.workdir,
            log_path=self.workdir / "train.log",
            tmux_socket=self.tmux_socket,
            config={"experiment": "demo", "lr": 3e-4, "note": "synthetic run; loss turns NaN"},
            wandb=False,  # a synthetic run: it does not use W&B, so no W&B rule applies to it
        )
        launched = launch_local(spec, store=store, host=settings_host)
        session = cast(p.RunLaunchedData, launched.data)["session"]
        self.say(f"launched {RUN} in tmux session {session} (loss turns NaN at step {self.nan_at})")

        state = self._wait_for_stop(store)
        time.sleep(0.3)  # let the notifier print the last line before the summary
        self.stop_notifier.set()
        thread.join(timeout=5)
        return self._summary(store, state)

    def _spawn(self, name: str, config: Path) -> None:
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "trainwarden", "--config", str(config), "--log-level", "WARNING", name]
        with open(logs / f"{name}.log", "wb") as sink:
            self.procs[name] = subprocess.Popen(
                argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )

    def _wait_for_stop(self, store: EventStore) -> RunState:
        deadline = time.monotonic() + DEMO_TIMEOUT_S
        while time.monotonic() < deadline:
            state = self._state(store)
            if any(s["type"] in (t.STOP_DONE, t.STOP_FAILED) for s in state.stops):
                return state
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise DemoError(f"the {name} process exited with {proc.returncode}: {self._log_tail(name)}")
            time.sleep(0.1)
        raise DemoError(
            f"no stop within {DEMO_TIMEOUT_S:.0f}s; worker log: {self._log_tail('worker')}; "
            f"agent log: {self._log_tail('agent')}"
        )

    @staticmethod
    def _state(store: EventStore) -> RunState:
        return fold(item for _, item in store.iter_run(RUN) if not isinstance(item, Malformed))

    def _summary(self, store: EventStore, state: RunState) -> int:
        events = [item for _, item in store.iter_run(RUN) if isinstance(item, Event)]
        # a metric's values are keys beyond MetricData's (its canonical names): read untyped
        nan_metric = next((e for e in events if e.type == t.METRIC and str(e.data.get("loss")) == "nan"), None)
        decisions = [e for e in events if e.type == t.DECISION]
        stop = next((e for e in decisions if cast(p.DecisionData, e.data).get("decision") == t.STOP), None)
        rule = cast(p.DecisionData, stop.data).get("rule") if stop else None
        openings = [e for e in events if e.type == t.ANOMALY_OPENED]
        anomaly = next((e for e in openings if cast(p.AnomalyOpenedData, e.data).get("rule") == rule), None)
        done = next((e for e in events if e.type in (t.STOP_DONE, t.STOP_FAILED)), None)
        built = next((e for e in events if e.type == t.EVIDENCE_BUILT), None)
        target = StopTarget.from_launch(RUN, state.launch, default_host=state.host)
        alive = LocalTmuxController().is_running(target)
        print(file=self.out)
        self.say("result, read back from the event log")
        if anomaly:
            print(f"    anomaly:       {render.describe(anomaly)}", file=self.out)
        if stop:
            print(f"    decision:      {render.describe(stop)}", file=self.out)
        for path in state.evidence:
            kept = Path(path)
            print(f"    evidence pack: {kept}", file=self.out)
            for f in sorted(kept.iterdir()):
                print(f"                   - {f.name} ({f.stat().st_size} bytes)", file=self.out)
        if built and (summary := cast(p.EvidenceBuiltData, built.data).get("summary")):
            print(f"    {summary}", file=self.out)
        if done:
            print(f"    stop:          {done.type}: {render.describe(done)}", file=self.out)
        print(f"    tmux session:  {target.session} {'STILL RUNNING' if alive else 'gone'}", file=self.out)
        if nan_metric and stop:
            print(f"    latency:       NaN line read -> STOP decision {1000 * (stop.ts - nan_metric.ts):.0f} ms",
                  file=self.out)  # fmt: skip
        ok = bool(anomaly and stop and done and done.type == t.STOP_DONE and state.evidence and not alive)
        self.say("demo passed: NaN caught, run stopped, evidence saved" if ok else "demo FAILED (see above)")
        return 0 if ok else 1

    def _log_tail(self, name: str) -> str:
        path = self.workdir / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-1500:] if path.exists() else "(no log)"

    def _teardown(self) -> None:
        self.stop_notifier.set()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
        subprocess.run(tmux_argv(self.tmux_socket, "kill-server"), capture_output=True, check=False)


def run_demo(*, nan_at: int = 25, keep: bool = False, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if shutil.which("tmux") is None:
        raise DemoError("tmux not found on PATH; install it (Debian: sudo apt-get install tmux) or use ./dev.sh demo")
    workdir = Path(tempfile.mkdtemp(prefix="trainwarden-demo-"))
    evidence_dir = Path.cwd() / KEPT_EVIDENCE
    if problem := writable.write_problem(evidence_dir, directory=True):  # then the pack stays in the kept workdir
        print(f"==> ./{KEPT_EVIDENCE} {problem}: the evidence pack goes to {workdir}, which is kept", file=out)
        evidence_dir, keep = workdir / "evidence", True
    try:
        return Demo(nan_at=nan_at, workdir=workdir, out=out, evidence_dir=evidence_dir).run()
    finally:
        if keep:
            print(f"==> kept {workdir}", file=out)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            print(f"==> removed {workdir} (logs, Redis data; --keep keeps them); the evidence pack stays in "
                  f"{evidence_dir}", file=out)  # fmt: skip
