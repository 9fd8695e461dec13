"""A trainer prints its secrets; none of them is stored or shown anywhere by trainwarden.

The agent, the dispatcher and the worker run as real processes WITHOUT the secrets in their
environment (as the systemd unit ships them). Two trainers hold them in theirs: one launched with
`trainwarden launch` in tmux (with a bare W&B key as a positional argument, then NaN -> STOP with
evidence), one started directly and registered with its pid (a traceback, then exit 1 ->
`run.failed` with a log tail). Then Redis (every key), the evidence packs, the findings file, the
daemon logs and everything posted to (and answered through) the local Slack API are searched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.redis_types import field_map

from tests.conftest import REPO
from tests.helpers import events_of, wait_for
from tests.slack_bot import command, running_bot

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.slow]

# Built by concatenation so that no scanner takes this file for a leak.
SHAPED = {
    "HF_TOKEN": "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm0123",
    "MY_SLACK_TOKEN": "xoxb-" + "2222222222-3333333333-QwErTyUiOp",
    "SLACK_APP_TOKEN": "xapp-" + "1-A0123456-7890-qwertyuiop",
    "AWS_ACCESS_KEY_ID": "AKIA" + "QWERTYUIOPASDFGH",
    "GITHUB_TOKEN": "ghp_" + "QwErTyUiOpAsDfGhJkLzXcVbNm0123456789",
    "GH_PAT": "github_pat_" + "11QWERTYU0123456789_QwErTyUiOpAsDf",
    "OPENAI_API_KEY": "sk-proj-" + "QwErTyUiOpAsDfGhJkLzXcVb_0123",
    "OTHER_KEY": "sk-" + "QwErTyUiOpAsDfGhJkLzXcVb",
}
UNSHAPED = {  # only knowing the environment tells these are secrets
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef" + "a1b2c3d4",  # a classic 40-hex W&B key
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYQWERTYKEY",
    "DB_PASSWORD": "Zq8-correct-horse-" + "battery",
}
SECRETS = {**SHAPED, **UNSHAPED}
POSITIONAL = "wandb_v1_" + "PoSiTiOnAl0123456789AbCdEfGhIjKl"  # given on the command line only
ASKED = "wandb_v1_" + "SlAcKuSeR0123456789AbCdEfGhIjKl"  # typed into Slack only
PLANTED = [*SECRETS.values(), POSITIONAL, ASKED]

TRAINER = """
import os, sys, time, traceback
from pathlib import Path
NAMES = {names!r}
SHAPED = {shaped!r}
start, nan_at = Path(sys.argv[1]), int(sys.argv[2])
while not start.exists():
    time.sleep(0.02)
for arg in sys.argv[3:]:
    print(f"RuntimeError: wandb login refused for {{arg}}", flush=True)
for name in NAMES:
    print(f"ValueError: rejected {{os.environ[name]}}", flush=True)
try:
    raise PermissionError("auth failed with " + " ".join(os.environ[n] for n in NAMES))
except PermissionError:
    traceback.print_exc(file=sys.stdout)
    sys.stdout.flush()
if nan_at < 0:  # the failing trainer: a traceback, then exit 1
    time.sleep(0.5)
    Path(os.environ["EXIT_FILE"]).write_text("1")
    sys.exit(1)
for step in range(1, 100000):
    if step == nan_at - 2:  # shaped secrets in the last lines too: the worker's evidence tail reads the file
        print("RuntimeError: retrying with " + " ".join(os.environ[n] for n in SHAPED), flush=True)
    print(f"step={{step}} loss={{'nan' if step >= nan_at else 2.0 / step}}", flush=True)
    time.sleep(0.02)
"""


def daemon(settings: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """A trainwarden daemon at INFO, its environment free of the planted secrets."""
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    argv = [sys.executable, "-m", "trainwarden", "--config", str(settings), "--log-level", "INFO", *args]
    with open(log, "ab") as sink:
        return subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=REPO)  # fmt: skip


def everything_in_redis(r) -> bytes:
    out = []
    for key in r.scan_iter(count=1000):
        kind = r.type(key)
        if kind == b"stream":
            out += [json.dumps({k.decode(): v.decode("latin-1") for k, v in f.items()}) for _, f in r.xrange(key)]
        elif kind == b"hash":
            out += [repr(r.hgetall(key))]
        elif kind == b"string":
            out += [repr(r.get(key))]
        elif kind == b"list":
            out += [repr(r.lrange(key, 0, -1))]
        elif kind == b"set":
            out += [repr(r.smembers(key))]
        elif kind == b"zset":
            out += [repr(r.zrange(key, 0, -1))]
    return "\n".join(out).encode()


def files_under(path: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()) if path.exists() else b""


def test_planted_secrets_are_stored_and_shown_nowhere(r, store, redis_server, settings_file, tmp_path, tmux_socket,
                                                       slack_api):  # fmt: skip
    settings = yaml.safe_load(settings_file.read_text())
    settings["agent"]["process_interval_s"] = 0.2
    settings_file.write_text(yaml.safe_dump(settings))
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER.format(names=sorted(SECRETS), shaped=sorted(SHAPED)))
    start = tmp_path / "start"
    logs = {name: tmp_path / f"{name}.log" for name in ("agent", "dispatcher", "worker", "launch")}
    procs = [daemon(settings_file, logs[name], name) for name in ("agent", "dispatcher", "worker")]
    failing = None
    try:
        # the run that is stopped: `trainwarden launch` from a shell holding the secrets, a bare key as argument
        launch_env = {**os.environ, **SECRETS}
        argv = [sys.executable, "-m", "trainwarden", "--config", str(settings_file), "launch", "--workdir",
                str(tmp_path), "--log", str(tmp_path / "stop.log"), "--tmux-socket", tmux_socket, "--check-s", "0",
                "exp-stop", "--", sys.executable, str(trainer), str(start), "40", POSITIONAL]  # fmt: skip
        done = subprocess.run(argv, env=launch_env, cwd=REPO, capture_output=True, timeout=30, check=False)
        logs["launch"].write_bytes(done.stdout + done.stderr)
        assert done.returncode == 0, done.stderr
        # the run that fails: started here with the secrets, registered with the agent by pid
        fail_log = tmp_path / "fail.log"
        with open(fail_log, "wb") as sink:
            failing = subprocess.Popen([sys.executable, str(trainer), str(start), "-1"], stdout=sink,
                                       stderr=subprocess.STDOUT, env={**os.environ, **SECRETS,
                                       "EXIT_FILE": f"{fail_log}.exit"})  # fmt: skip
        watch = {"op": "watch", "run": "exp-fail", "log": str(fail_log), "pid": str(failing.pid)}
        store.redis.xadd(store.keys.agent_control("testhost"), field_map(watch))
        # a malformed control message holding a secret: the agent logs why it skips it (the daemon log is masked)
        bad = {"op": "watch", "run": "exp-bad", "log": "/nonexistent.log", "pid": SHAPED["HF_TOKEN"]}
        bad_id = store.redis.xadd(store.keys.agent_control("testhost"), field_map(bad))
        wait_for(lambda: "skipping control message" in logs["agent"].read_text(), timeout=20, what="agent log")
        store.redis.xdel(store.keys.agent_control("testhost"), bad_id)  # planted by the test itself
        for run in ("exp-stop", "exp-fail"):  # the agent follows both runs' processes before they print
            wait_for(lambda run=run: [e for e in events_of(store, run, t.HEALTH) if e.data.get("alive")],
                     timeout=20, what=f"{run} seen alive")  # fmt: skip
        start.touch()
        with running_bot(redis_server.url, slack_api) as bot:
            wait_for(lambda: events_of(store, "exp-stop", t.STOP_DONE), timeout=40, what="exp-stop stopped")
            wait_for(lambda: events_of(store, "exp-fail", t.RUN_FAILED), timeout=20, what="exp-fail failed")
            wait_for(lambda: any("FAILED" in m.text for m in slack_api.messages) and
                     any("STOP" in m.text for m in slack_api.messages), timeout=20, what="posts")  # fmt: skip
            replies = [command(bot, slack_api, "status", ASKED), command(bot, slack_api, "status", SHAPED["HF_TOKEN"]),
                       command(bot, slack_api, "stop", f"exp-stop {SHAPED['GITHUB_TOKEN']}"),
                       command(bot, slack_api, "launch", SHAPED["OPENAI_API_KEY"])]  # fmt: skip
    finally:
        for p in [*procs, *([failing] if failing else [])]:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        for name, path in logs.items():
            print(f"--- {name}.log (tail)\n" + path.read_text(errors="replace")[-2000:] if path.exists() else "")

    # the secrets really were printed, and the events that carry text were made
    assert all(s in (tmp_path / "stop.log").read_text() for s in [*SECRETS.values(), POSITIONAL])
    assert all(s in fail_log.read_text() for s in SECRETS.values())
    lines = [e.data["line"] for run in ("exp-stop", "exp-fail") for e in events_of(store, run, t.LOG_LINE)]
    assert any("Traceback" in line and "***" in line for line in lines)
    (failed,) = events_of(store, "exp-fail", t.RUN_FAILED)
    assert any("***" in line for line in failed.data["log_tail"])
    (launched,) = events_of(store, "exp-stop", t.RUN_LAUNCHED)
    assert launched.data["command"][-1] == "***"
    assert [code for code, _ in replies] == [200] * 4
    assert all("not echoed" in body.get("text", "") for _, body in replies), replies

    places = {
        "redis": everything_in_redis(r),
        "evidence": files_under(tmp_path / "evidence"),
        "findings": (tmp_path / "findings.md").read_bytes() if (tmp_path / "findings.md").exists() else b"",
        "daemon logs": b"".join(p.read_bytes() for p in logs.values() if p.exists()),
        "slack": json.dumps([slack_api.calls, slack_api.responses, replies], default=str).encode(),
    }
    assert b"evidence.json" in places["redis"] and places["evidence"] and places["findings"]
    leaks = [(where, s) for where, blob in places.items() for s in PLANTED if s.encode() in blob]
    assert leaks == []


def test_the_agent_learns_a_runs_secrets_from_its_process_tree(tmp_path):
    """As a run script does: the wrapper holds no secret, the trainer it starts does; the agent,
    following the wrapper's pid, learns the trainer's secret values (and no ordinary value)."""
    from trainwarden.agent.runsecrets import RunSecrets
    from trainwarden.agent.watch import RunWatch

    trainer_env = {**UNSHAPED, "SHORT_TOKEN": "1", "HOME": "/home/someone"}
    child = (f"import os, subprocess, sys; env = {{**os.environ, **{trainer_env!r}}}; "
             "subprocess.run([sys.executable, '-c', 'import time; time.sleep(30)'], env=env)")  # fmt: skip
    wrapper = subprocess.Popen([sys.executable, "-c", child], env={"PATH": os.environ.get("PATH", "")},
                               start_new_session=True)  # fmt: skip
    try:
        children = Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children")
        wait_for(lambda: children.read_text().strip(), what="the trainer process")
        values = RunSecrets(RunWatch(run="exp01", log=tmp_path / "x.log", pid=wrapper.pid))()
        assert set(UNSHAPED.values()) <= set(values)
        assert "1" not in values and "/home/someone" not in values
    finally:
        os.killpg(wrapper.pid, 9)
        wrapper.wait()
