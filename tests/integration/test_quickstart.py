"""The README's quick start, run as written: its bash blocks, in order, with real processes.

What the test changes, and only that:
- HOME is a temporary directory (so `~/proj` and the default data directory `~/.local/share/trainwarden`
  are in it; XDG_DATA_HOME, TRAINWARDEN_CONFIG and TRAINWARDEN_DATA_DIR are unset), with a tiny
  training script at ~/proj/train.py whose loss jumps for two steps: the alert to see.
- REDIS_URL names a free loopback port, so `trainwarden up --redis` starts its own redis-server there.
- TMUX_TMPDIR is a temporary directory: the runs' tmux server is private to the test; XDG_CACHE_HOME stays
  the real one, so the worker finds matplotlib's font cache instead of building it again (seconds).
- The install line (`pip install`) is not run: the test runs inside the installed environment, and
  `. .venv/bin/activate` is done by putting this interpreter's bin directory first on PATH.
- `trainwarden up` runs in the background, as in its own terminal; "Ctrl-C" is SIGINT to its process group.
Between steps the test waits for what the README says appears on up's console (the alert, STOPPED).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from trainwarden.events.heartbeat import read_beats
from trainwarden.events.keys import Keys

from tests.conftest import REPO
from tests.helpers import wait_for
from tests.report_format import skill_fields
from trainwarden.tools.redis_server import free_port

TRAIN_PY = """\
import sys, time
lr = float(sys.argv[sys.argv.index("--lr") + 1])
step = 0
while True:
    step += 1
    loss = 20.0 if step in (12, 13) else 2.5 - step * 0.01
    print(f"step={step} loss={loss:.4f} lr={lr}", flush=True)
    time.sleep(0.05)
"""
INSTALL = "pip install"
ACTIVATE = ". .venv/bin/activate"
UP = "trainwarden up"


def quick_start_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Quick start.*?(?=^## )", text, re.M | re.S)
    assert section, "README.md has no Quick start section"
    return re.findall(r"^```bash\n(.*?)^```", section.group(0), re.M | re.S)


def output(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.mark.skipif(sys.platform != "linux", reason="tmux and process groups as on a Linux server")
def test_the_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    (home / "proj" / "train.py").write_text(TRAIN_PY)
    port = free_port()
    unset = ("XDG_DATA_HOME", "TRAINWARDEN_CONFIG", "TRAINWARDEN_DATA_DIR", "TMUX", "REDIS_URL")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(HOME=str(home), REDIS_URL=f"redis://127.0.0.1:{port}/0", TMUX_TMPDIR=str(tmp_path),
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")  # fmt: skip
    data = home / ".local" / "share" / "trainwarden"
    console = tmp_path / "up-console.txt"

    blocks = quick_start_blocks()
    install = next(b for b in blocks if INSTALL in b)
    assert ACTIVATE in install.splitlines()  # the step that puts `trainwarden` on PATH, done here through PATH
    up_line = next(line for b in blocks for line in b.splitlines() if line.startswith(UP))
    steps = [b for b in blocks if b is not install and UP not in b]
    assert [s for s in steps if "trainwarden launch" in s] and [s for s in steps if "trainwarden stop" in s]

    began = time.monotonic()

    def took(what: str) -> None:
        print(f"{time.monotonic() - began:6.2f}s {what}")

    with open(console, "wb") as sink:
        up = subprocess.Popen(["bash", "-c", up_line], cwd=home, env=env, stdout=sink, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    client = redis.Redis(port=port)
    try:
        wait_for(lambda: "all four daemons are running" in output(console) or up.poll() is not None,
                 timeout=60, what="up: all four daemons running")  # fmt: skip
        assert up.poll() is None, output(console)
        took("up: all four daemons running")
        beats = {b.role: b.pid for b in read_beats(client, Keys())}
        assert set(beats) == {"agent", "dispatcher", "worker", "notifier"}

        said: dict[str, str] = {}
        for step in steps:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=home, env=env, capture_output=True,
                                  text=True, timeout=60, check=False)  # fmt: skip
            assert done.returncode == 0, f"{step}\n{done.stdout}\n{done.stderr}\n--- up:\n{output(console)[-3000:]}"
            said[step] = done.stdout
            took(step.splitlines()[0][:60])
            if "trainwarden launch" in step:  # README step 4: the alert shows up on up's console
                wait_for(lambda: re.search(r"ANOMALY exp01@\S+: loss=\S+ .*\(loss-spike, warning\)", output(console)),
                         timeout=30, what="the loss-spike alert on up's console")  # fmt: skip
                took("alert seen")
            if "trainwarden stop" in step:  # README step 5: STOPPED, the tmux session gone
                wait_for(lambda: re.search(r"STOPPED exp01@\S+: sent Ctrl-C to train-exp01", output(console)),
                         timeout=30, what="STOPPED on up's console")  # fmt: skip
                took("STOPPED seen")
                gone = subprocess.run(["tmux", "has-session", "-t", "train-exp01"], env=env, capture_output=True,
                                      check=False)  # fmt: skip
                assert gone.returncode != 0, "the run's tmux session is still there"
        health = next(out for step, out in said.items() if "trainwarden health" in step)
        assert f"data directory here: {data}" in health
        report = next(out for step, out in said.items() if "trainwarden check" in step)
        assert "exp01" in report and "loss" in report  # (the spike is over by then: the report lists open anomalies)
        fields = skill_fields(report)  # the method's eight lines, read by a real agent from a real run's log
        assert fields["source"] == "log_fallback" and fields["run"].startswith("exp01 on "), report
        assert re.search(r"log \S+/exp01\.log lines \d+-\d+", fields["evidence"]), report

        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C in up's terminal
        assert up.wait(timeout=40) == 0, output(console)[-3000:]
        assert "all stopped (exit statuses: agent 0, dispatcher 0, worker 0, bot 0)" in output(console)
        took("up exited")
    finally:
        for sig, grace in ((signal.SIGINT, 40), (signal.SIGINT, 10), (signal.SIGKILL, 10)):  # up stops its daemons
            if up.poll() is None:
                os.killpg(up.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    up.wait(timeout=grace)
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True, check=False)
        print("--- up's console (tail)\n" + output(console)[-4000:])
        took("end")

    for role, pid in beats.items():  # every daemon gone, and the redis-server that --redis started
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text(), role
    with pytest.raises(redis.ConnectionError):
        client.ping()
    assert sorted(p.name for p in (data / "logs").iterdir()) == ["agent.log", "bot.log", "dispatcher.log",
                                                                 "worker.log"]  # fmt: skip
    assert "STOPPED exp01" in (data / "logs" / "bot.log").read_text()
    assert (data / "redis" / "appendonlydir").is_dir()  # AOF on
    assert (data / "agent-state.json").is_file()
    assert not (home / "proj" / "evidence").exists() and not (home / "findings.md").exists()
