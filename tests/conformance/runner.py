"""One conformance case, live: the framework's script runs in its venv under a wrapper that writes its
exit code (as `trainwarden launch`'s does), `trainwarden watch` hands it to the real agent, and the real
dispatcher and workers judge it. A pump copies the script's output to the watched log and notes when
the scenario's bad line was written, so the latency is bad line written -> STOP (or fault anomaly); for a
stall, the last training step's event -> the run-stalled anomaly. A run that never ends (a hang) is kept
until its alert (and the stack dump it expects) came, at most its scenario's wait_s."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.store import EventStore
from trainwarden.policies.kinds.values import has_training_value
from trainwarden.remote.wrapper import launch_env

from tests.conformance.matrix import FRAMEWORKS, SCENARIOS, Case, Expect, matches
from tests.helpers import evaluated_to_end, events_of

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "frameworks"
REGISTER = threading.Lock()  # `trainwarden watch` runs in this process: one at a time
RUN_TIMEOUT_S = 150.0
DUMP_WAIT_S = 20.0  # after the stall opened, how long its stack dump may take to arrive
STALL_RULE = "run-stalled"


@dataclass
class Result:
    case: Case
    exit_code: int | None = None
    stops: list[str] = field(default_factory=list)  # rule of each STOP decision
    guarded: list[bool] = field(default_factory=list)  # whether each STOP decision asks a person first (confirm_s)
    anomalies: list[tuple[str, str, str]] = field(default_factory=list)  # (rule, severity, reason)
    latency_ms: float | None = None
    stop_step: object = None  # the step of the first STOP decision
    stall_ms: float | None = None  # the last training step's event -> the run-stalled anomaly
    stall_reason: str | None = None  # the first run-stalled anomaly's reason
    max_gap_s: float | None = None  # the longest gap between two training steps' events
    dumps: list[str] = field(default_factory=list)  # each process.dump's `verdict: where (category)`
    trigger_line: str | None = None
    stop_outcome: str | None = None
    error: str | None = None
    tail: str = ""

    @property
    def verdict(self) -> str:
        if self.error:
            return f"ERROR {self.error}"
        if self.stops:
            return f"STOP {self.stops[0]}"
        worst = [a for a in self.anomalies if a[1] in ("critical", "warning")]
        if worst:
            crit = [a for a in worst if a[1] == "critical"] or worst
            return f"{crit[0][1]} {crit[0][0]}"
        return "CONTINUE"

    def problems(self) -> list[str]:
        """How the outcome differs from the scenario's expected verdict (empty: as expected)."""
        e: Expect = SCENARIOS[self.case.scenario]
        out = [f"harness: {self.error}"] if self.error else []
        if e.stop is True and not self.stops:
            out.append("expected a STOP, none was decided")
        if e.stop is True and self.stops and self.stops[0] not in e.stop_rules:
            out.append(f"STOP by {self.stops[0]}, expected one of {sorted(e.stop_rules)}")
        if e.confirm and self.stops and not self.guarded[0]:
            out.append(f"STOP by {self.stops[0]} was not a guarded STOP (no confirm_s): a judgement must ask first")
        if e.stop is False and self.stops:
            out.append(f"unexpected STOP by {self.stops[0]}")
        if e.anomaly is not None and not any(
            s in e.severities and matches(e.anomaly, f"{r}: {why}") for r, s, why in self.anomalies
        ):
            out.append(f"no {'/'.join(e.severities)} anomaly matching {e.anomaly!r}")
        noisy = [a for a in self.anomalies if a[1] in ("warning", "critical")] if e.clean else []
        noisy += [a for a in self.anomalies if a[1] == "critical"] if e.no_critical else []
        out += [f"false alarm {r} ({s}): {why}" for r, s, why in noisy]
        out += [
            f"unexpected {r} ({s}): {why}"
            for r, s, why in self.anomalies
            if e.absent and matches(e.absent, f"{r}: {why}")
        ]
        if (
            e.stop_by_step is not None
            and self.stops
            and not (isinstance(self.stop_step, int | float) and self.stop_step <= e.stop_by_step)
        ):
            out.append(f"STOP at step {self.stop_step}, later than step {e.stop_by_step}: not in time")
        if e.dump is not None and not any(re.search(e.dump, d) for d in self.dumps):
            out.append(f"no {t.PROCESS_DUMP} matching {e.dump!r} (the blocked call); dumps: {self.dumps}")
        if e.slow_gap_s is not None and (self.max_gap_s or 0) < e.slow_gap_s:
            out.append(f"its longest gap between steps was {self.max_gap_s}s, not over {e.slow_gap_s}s: the run did "
                       "not outlast the step budget, so its quiet proves nothing")  # fmt: skip
        return out


def command(case: Case, workdir: Path) -> tuple[list[str], Path]:
    """The argv of the case's script and the path the agent watches."""
    fw = FRAMEWORKS[case.framework]
    py = REPO / fw.venv / "bin" / "python"
    args = [a.format(s=case.scenario) for a in fw.argv]
    launcher = [str(py), "-m", "torch.distributed.run", "--nproc-per-node", "2"] if fw.launcher == "torchrun" else [
        str(py)]  # fmt: skip
    watched = workdir / "train.log" if fw.watch == "log" else workdir / fw.watch
    return [*launcher, *args], watched


def run_case(case: Case, *, store: EventStore, settings: Path, root: Path) -> Result:
    from tests.conftest import cli_argv
    from trainwarden.cli.entry import main

    result = Result(case)
    workdir = root / case.id
    workdir.mkdir(parents=True)
    argv, watched = command(case, workdir)
    console = workdir / "train.log"
    if watched.suffix == "" and watched != console:
        watched.mkdir(parents=True)  # a TensorBoard directory must exist when the watch starts
    exit_file = Path(f"{watched}.exit")
    # As a lab runs it: not this machine's PYTHONUNBUFFERED, only what `launch` itself gives a run (LAUNCH_ENV)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k != "PYTHONUNBUFFERED"}
    env |= {**launch_env({}), "PYTHONPATH": str(SCRIPTS), "KERAS_BACKEND": "torch", "OMP_NUM_THREADS": "1",
            "CONFORMANCE_OUT": str(workdir), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            **FRAMEWORKS[case.framework].env}  # fmt: skip
    wrapper = f"{shlex.join(argv)}; echo $? > {shlex.quote(str(exit_file))}"
    proc = subprocess.Popen(["sh", "-c", wrapper], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=SCRIPTS, env=env, start_new_session=True)  # fmt: skip
    trigger = SCENARIOS[case.scenario].trigger
    seen: dict[str, float | str] = {}
    pump = threading.Thread(target=_pump, args=(proc, console, trigger, seen), daemon=True)
    pump.start()
    run = f"cf-{case.id}"
    try:
        with REGISTER, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            offline = ["--allow-offline-wandb"] if env.get("WANDB_MODE") == "offline" else []  # offline on purpose
            code = main(cli_argv(settings, "watch", run, "--log", str(watched), "--pid", str(proc.pid),
                                 "--grace", "3", "--timeout", "30", *offline)[3:])  # fmt: skip
        if code != 0:
            result.error = f"trainwarden watch exited {code}: {err.getvalue().strip()[-300:]}"
        expect = SCENARIOS[case.scenario]
        if expect.wait_s is not None:
            _await_alert(proc, store, run, expect)
        else:
            try:
                proc.wait(timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                result.error = f"still running after {RUN_TIMEOUT_S:.0f}s"
        _settle(store, run)
    finally:
        tree = _descendants(proc.pid)  # torchrun starts each rank in a session of its own: not in the group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        proc.wait()
        pump.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    left = _still_alive(tree)
    if left and not result.error:
        result.error = f"left processes behind after killing the run: {left}"
    result.exit_code = proc.returncode
    _read_back(result, store, run, seen)
    result.tail = console.read_text(errors="replace")[-2500:] if console.exists() else ""
    return result


def _descendants(pid: int) -> list[int]:
    """pid's processes below it, from /proc (killing the wrapper's process group left a hung torchrun run's
    ranks alive, each in a session of its own: 2 processes a run, for ever)."""
    out, todo = [], [pid]
    while todo:
        for children in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                kids = [int(c) for c in children.read_text().split()]
                out += kids
                todo += kids
    return out


def _still_alive(pids: list[int], wait_s: float = 5.0) -> list[int]:
    """Those of `pids` alive (not gone, not a zombie) `wait_s` after the run was killed."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = [p for p in pids if _alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _pump(proc: subprocess.Popen[bytes], log: Path, trigger: str | None, seen: dict[str, float | str]) -> None:
    assert proc.stdout is not None
    pending = ""
    with open(log, "ab") as sink:
        while chunk := os.read(proc.stdout.fileno(), 65536):
            sink.write(chunk)
            sink.flush()
            now = time.time()
            if trigger and "at" not in seen:
                pending += chunk.decode(errors="replace")
                *lines, pending = re.split(r"[\r\n]", pending)
                for line in lines:
                    if re.search(trigger, line):
                        seen["at"], seen["line"] = now, line.strip()[:400]
                        break


def _await_alert(proc: subprocess.Popen[bytes], store: EventStore, run: str, e: Expect) -> None:
    """Until the run ends, or its expected anomaly opened (and its expected dump came, or DUMP_WAIT_S passed),
    at most e.wait_s: a hang never ends by itself, and waiting out the whole limit cost CI minutes."""
    assert e.wait_s is not None
    deadline = time.monotonic() + e.wait_s
    opened_at: float | None = None
    while time.monotonic() < deadline and proc.poll() is None:
        events = events_of(store, run)
        if opened_at is None and any(_matches(a, e) for a in events if a.type == t.ANOMALY_OPENED):
            opened_at = time.monotonic()
        if opened_at is not None and (
            e.dump is None
            or time.monotonic() - opened_at > DUMP_WAIT_S
            or any(re.search(e.dump, _dump(d)) for d in events if d.type == t.PROCESS_DUMP)
        ):
            return
        time.sleep(0.5)


def _dump(event: Event) -> str:
    """A process.dump as the expectations read it: its verdict, where it waits, and in what (hang: lock.acquire
    (lock))."""
    d = event.data
    return f"{d.get('verdict')}: {d.get('where')} ({d.get('category')}, {d.get('method')})"


def _matches(anomaly: Event, e: Expect) -> bool:
    return anomaly.data.get("severity") in e.severities and matches(
        e.anomaly, f"{anomaly.data['rule']}: {anomaly.data['reason']}"
    )


def _settle(store: EventStore, run: str) -> None:
    """Until the workers have judged everything the agent sent (twice, 0.5 s apart: an anomaly or a
    stop outcome they append is judged too), at most 30 s."""
    deadline = time.monotonic() + 30
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        stopping = events_of(store, run, t.STOP_REQUESTED) and not (
            events_of(store, run, t.STOP_DONE) or events_of(store, run, t.STOP_FAILED))  # fmt: skip
        quiet = quiet + 1 if evaluated_to_end(store, run) and not stopping else 0
        time.sleep(0.5)


def _read_back(result: Result, store: EventStore, run: str, seen: dict[str, float | str]) -> None:
    events = events_of(store, run)
    stops = [e for e in events if e.type == t.DECISION and e.data.get("decision") == t.STOP]
    result.stops = [str(e.data.get("rule")) for e in stops]
    result.guarded = [bool(e.data.get("confirm_s")) for e in stops]
    result.stop_step = stops[0].data.get("values", {}).get("step") if stops else None
    opened = [e for e in events if e.type == t.ANOMALY_OPENED]
    result.anomalies = [(str(e.data["rule"]), str(e.data["severity"]), str(e.data["reason"])) for e in opened]
    outcome = [e for e in events if e.type in (t.STOP_DONE, t.STOP_FAILED)]
    if outcome:
        result.stop_outcome = f"{outcome[0].type}: {outcome[0].data.get('method', outcome[0].data.get('error'))}"
    result.trigger_line = str(seen["line"]) if "line" in seen else None
    result.dumps = [_dump(d) for d in events if d.type == t.PROCESS_DUMP]
    _stall_timing(result, events)
    e = SCENARIOS[result.case.scenario]
    if "at" in seen:
        if stops and e.stop:
            result.latency_ms = (stops[0].ts - float(seen["at"])) * 1000
        elif e.anomaly:
            hit = [a for a in opened if matches(e.anomaly, f"{a.data['rule']}: {a.data['reason']}")]
            if hit:
                result.latency_ms = (hit[0].ts - float(seen["at"])) * 1000
    if e.wait_s is not None and result.latency_ms is None:
        result.latency_ms = result.stall_ms


def _stall_timing(result: Result, events: list[Event]) -> None:
    """The training steps' times (the first event of each new step holding a training value, as the stall kind
    counts them): the longest gap between two, and the last one before run-stalled opened -> its opening."""
    steps: list[float] = []
    last = None
    for ev in events:
        step = ev.data.get("step") if ev.type == t.METRIC else None
        if step is not None and step != last and has_training_value(ev.data):
            steps.append(ev.ts)
            last = step
    gaps = [b - a for a, b in itertools.pairwise(steps)]
    result.max_gap_s = round(max(gaps), 1) if gaps else None
    stalled = [ev for ev in events if ev.type == t.ANOMALY_OPENED and ev.data.get("rule") == STALL_RULE]
    before = [ts for ts in steps if stalled and ts <= stalled[0].ts]
    if before:
        result.stall_ms = (stalled[0].ts - before[-1]) * 1000
    result.stall_reason = str(stalled[0].data.get("reason")) if stalled else None
