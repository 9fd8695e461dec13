"""One conformance case, live: the framework's script runs in its venv under a wrapper that writes its
exit code (as `trainwarden launch`'s does), `trainwarden watch` hands it to the real agent, and the real
dispatcher and workers judge it. A pump copies the script's output to the watched log and notes when
the scenario's bad line was written, so the latency is bad line written -> STOP (or fault anomaly)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainwarden.events import types as t
from trainwarden.events.store import EventStore

from tests.conformance.matrix import FRAMEWORKS, SCENARIOS, Case, Expect, matches
from tests.helpers import evaluated_to_end, events_of

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "frameworks"
REGISTER = threading.Lock()  # `trainwarden watch` runs in this process: one at a time
RUN_TIMEOUT_S = 150.0
HANG_WAIT_S = 150.0  # the default policy's run-stalled: 2m at least, then a process sample


@dataclass
class Result:
    case: Case
    exit_code: int | None = None
    stops: list[str] = field(default_factory=list)  # rule of each STOP decision
    anomalies: list[tuple[str, str, str]] = field(default_factory=list)  # (rule, severity, reason)
    latency_ms: float | None = None
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
        if e.stop is False and self.stops:
            out.append(f"unexpected STOP by {self.stops[0]}")
        if e.anomaly is not None and not any(
            s in e.severities and matches(e.anomaly, f"{r}: {why}") for r, s, why in self.anomalies
        ):
            out.append(f"no {'/'.join(e.severities)} anomaly matching {e.anomaly!r}")
        noisy = [a for a in self.anomalies if a[1] in ("warning", "critical")] if e.clean else []
        noisy += [a for a in self.anomalies if a[1] == "critical"] if e.no_critical else []
        out += [f"false alarm {r} ({s}): {why}" for r, s, why in noisy]
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
    from trainwarden.cli import main

    result = Result(case)
    workdir = root / case.id
    workdir.mkdir(parents=True)
    argv, watched = command(case, workdir)
    console = workdir / "train.log"
    if watched.suffix == "" and watched != console:
        watched.mkdir(parents=True)  # a TensorBoard directory must exist when the watch starts
    exit_file = Path(f"{watched}.exit")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env |= {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(SCRIPTS), "KERAS_BACKEND": "torch", "OMP_NUM_THREADS": "1",
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
        limit = HANG_WAIT_S if case.scenario == "hang" else RUN_TIMEOUT_S
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            if case.scenario != "hang":
                result.error = f"still running after {limit:.0f}s"
        _settle(store, run)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
        pump.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    result.exit_code = proc.returncode
    _read_back(result, store, run, seen)
    result.tail = console.read_text(errors="replace")[-2500:] if console.exists() else ""
    return result


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
    opened = [e for e in events if e.type == t.ANOMALY_OPENED]
    result.anomalies = [(str(e.data["rule"]), str(e.data["severity"]), str(e.data["reason"])) for e in opened]
    outcome = [e for e in events if e.type in (t.STOP_DONE, t.STOP_FAILED)]
    if outcome:
        result.stop_outcome = f"{outcome[0].type}: {outcome[0].data.get('method', outcome[0].data.get('error'))}"
    result.trigger_line = str(seen["line"]) if "line" in seen else None
    e = SCENARIOS[result.case.scenario]
    if "at" in seen:
        if stops and e.stop:
            result.latency_ms = (stops[0].ts - float(seen["at"])) * 1000
        elif e.anomaly:
            hit = [a for a in opened if matches(e.anomaly, f"{a.data['rule']}: {a.data['reason']}")]
            if hit:
                result.latency_ms = (hit[0].ts - float(seen["at"])) * 1000
