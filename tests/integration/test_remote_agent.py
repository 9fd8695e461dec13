"""An agent on another host, the lab's layout (docs/operations.md, "An agent on each GPU server"): a central
host with Redis and the dispatcher and worker, and a GPU server whose agent reaches that Redis over TLS
as an ACL user limited to what the agent sends.

Real processes: redis-server started from the shipped deploy/redis-central.conf (its certificate paths,
passwords and directory replaced; TLS with a throwaway CA made here), the agent as host `gpu1` with the
shipped deploy/agent.yaml, a data directory of its own and `rediss://agent-gpu1:...` (the conf's user and
rule); the dispatcher and worker as host `central` with another data directory, as the default user. A
training in tmux turns NaN: the agent's metric reaches the event log, the worker decides STOP and asks the
agent (its host's control stream), and the agent stops the run. `trainwarden health --here` and
`trainwarden watch` on the GPU server work as the agent's user; `health --here` fails with one line and
its fix for a wrong password, a missing CA, or a user that lacks a right; and the shipped SSH tunnel unit's
command carries the same connection through a real sshd."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.core.tmux import tmux_argv
from trainwarden.events import types as t
from trainwarden.events.access import agent_acl_rule
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.deploy_files import DEPLOY
from tests.helpers import events_of, wait_for
from tests.sshd import SshServer
from tests.tls import make_certs
from trainwarden.tools.redis_server import RedisServer, free_port

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.slow]

HOST = "gpu1"  # the GPU server, as deploy/redis-central.conf's agent user names it
CENTRAL = "central"
CENTRAL_PASSWORD = "central-3c9e1f-secret"
AGENT_USER, AGENT_PASSWORD = "agent-gpu1", "agent-7a42d0-secret"
WRONG = "wrong-55e1b2-password"


@dataclass(frozen=True)
class Central:
    server: RedisServer
    tls_port: int
    ca: Path

    def url(self, user: str, password: str, *, ca: bool = True) -> str:
        query = f"?ssl_ca_certs={self.ca}" if ca else ""
        return f"rediss://{user}:{password}@127.0.0.1:{self.tls_port}/0{query}"


@pytest.fixture(scope="module")
def central(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Central]:
    """redis-server from the shipped conf: TLS only but for the plain loopback port this test's own client uses."""
    d = tmp_path_factory.mktemp("central")
    ca, cert, key = make_certs(d)
    text = (DEPLOY / "redis-central.conf").read_text()
    for shipped, ours in (("/etc/redis/tls/redis.crt", cert), ("/etc/redis/tls/redis.key", key),
                          ("/etc/redis/tls/ca.crt", ca), ("/var/lib/redis-central", d / "redis"),
                          ("CHANGE-ME-central-password", CENTRAL_PASSWORD),
                          ("CHANGE-ME-gpu1-password", AGENT_PASSWORD)):  # fmt: skip
        assert shipped in text, shipped
        text = text.replace(shipped, str(ours))
    (conf := d / "redis.conf").write_text(text)
    (d / "redis").mkdir()
    tls_port = free_port()
    server = RedisServer(d / "redis", config=conf, password=CENTRAL_PASSWORD, extra_args=["--tls-port", str(tls_port)])
    with server:
        yield Central(server, tls_port, ca)


@pytest.fixture
def admin(central: Central) -> Iterator[redis.Redis]:
    client = central.server.client()
    client.flushall()
    client.acl_log_reset()
    yield client
    client.close()


def agent_settings(directory: Path, **watch: str) -> Path:
    """The shipped deploy/agent.yaml, with this test's watch and quick intervals (no NVML here)."""
    body = yaml.safe_load((DEPLOY / "agent.yaml").read_text())
    body["heartbeat_interval_s"] = 0.5
    body["agent"].update({"nvml": False, "poll_interval_s": 0.05, "watch": [watch] if watch else []})
    (path := directory / "agent.yaml").write_text(yaml.safe_dump(body))
    return path


def gpu_env(directory: Path, url: str) -> dict[str, str]:
    """The GPU server's environment as its unit gives it (agent.env: REDIS_URL; the host; the data directory)."""
    return {"REDIS_URL": url, "TRAINWARDEN_HOST": HOST, "TRAINWARDEN_DATA_DIR": str(directory / "data")}


def health_here(settings: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(settings, "health", "--here"), capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, **env})  # fmt: skip


def line(out: str, start: str) -> str:
    (found,) = [x for x in out.splitlines() if x.startswith(start)]
    return found


def test_the_conf_gives_the_agent_its_rule() -> None:
    """The shipped conf's agent user holds the rule `health --here` checks and prints (events/access.py)."""
    (user,) = [x for x in (DEPLOY / "redis-central.conf").read_text().splitlines() if x.startswith("user agent-")]
    assert user == f"user {AGENT_USER} on >CHANGE-ME-gpu1-password {agent_acl_rule(Keys(), HOST)}"


def test_nan_on_the_gpu_server_is_stopped_through_rediss_as_the_agent_user(
    central: Central, admin: redis.Redis, tmp_path: Path
) -> None:
    gpu, hub = tmp_path / "gpu1", tmp_path / "central"
    gpu.mkdir(), hub.mkdir()
    socket, log = f"tw-remote-{uuid.uuid4().hex[:8]}", gpu / "train.log"
    training = f"{sys.executable} -m trainwarden.tools.demo_train --nan-at 8 --interval 0.2 > {log} 2>&1"
    subprocess.run(tmux_argv(socket, "new-session", "-d", "-s", "train-exp01", training), check=True, cwd=REPO,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"})  # fmt: skip
    agent_yaml = agent_settings(gpu, run="exp01", log=str(log), session="train-exp01", tmux_socket=socket)
    env = gpu_env(gpu, central.url(AGENT_USER, AGENT_PASSWORD))
    (central_yaml := hub / "trainwarden.yaml").write_text(yaml.safe_dump({"heartbeat_interval_s": 0.5, "workers": {
        "reclaim_idle_s": 1, "lock_timeout_s": 2}}))  # fmt: skip
    central_env = {"REDIS_URL": central.url("default", CENTRAL_PASSWORD), "TRAINWARDEN_HOST": CENTRAL,
                   "TRAINWARDEN_DATA_DIR": str(hub / "data")}  # fmt: skip
    store = EventStore(admin, keys=Keys())
    procs = [
        spawn(agent_yaml, gpu / "agent.log", "agent", env=env),
        spawn(central_yaml, hub / "dispatcher.log", "dispatcher", env=central_env),
        spawn(central_yaml, hub / "worker.log", "worker", env=central_env),
    ]
    try:
        wait_for(lambda: events_of(store, "exp01", t.STOP_DONE), timeout=60, what="stop.done")
        here = health_here(agent_yaml, env)
    finally:
        for p in procs:
            stop_process(p)
        subprocess.run(tmux_argv(socket, "kill-server"), capture_output=True, check=False)
        for name in ("gpu1/agent", "central/dispatcher", "central/worker"):
            print(f"--- {name}.log\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-3000:])

    events = events_of(store, "exp01")
    (stop,) = [e for e in events if e.type == t.DECISION and e.data["decision"] == t.STOP]
    assert (stop.data["rule"], stop.data["reason"], stop.host) == ("loss-nonfinite", "loss=nan at step 8", CENTRAL)
    assert {e.host for e in events if e.type == t.METRIC} == {HOST}
    assert [e.host for e in events if e.type == t.STOP_DONE] == [HOST]  # carried out by the GPU server's agent
    assert admin.acl_log() == []  # the agent's user was refused nothing
    assert (gpu / "data" / "agent-state.json").exists() and not (gpu / "data" / "evidence").exists()
    assert any((hub / "data" / "evidence").iterdir()) and not (hub / "data" / "agent-state.json").exists()

    assert here.returncode == 0, here.stdout + here.stderr
    assert line(here.stdout, "OK   redis:").endswith(f"answers over TLS as user {AGENT_USER}")
    assert line(here.stdout, "OK   acl:").startswith(f"OK   acl: user {AGENT_USER} may run the agent's")
    assert f"agent@{HOST}" in here.stdout and "dispatcher@" not in here.stdout
    assert AGENT_PASSWORD not in here.stdout + here.stderr


def test_trainwarden_watch_on_the_gpu_server_as_the_agent_user(
    central: Central, admin: redis.Redis, tmp_path: Path
) -> None:
    """A run started by hand, added to the running agent with the agent's own URL: its rule allows that too."""
    (log := tmp_path / "train.log").write_text("step=1 loss=2.5\n")
    settings, env = agent_settings(tmp_path), gpu_env(tmp_path, central.url(AGENT_USER, AGENT_PASSWORD))
    training = subprocess.Popen(["sleep", "300"])  # the run's process, as `--pid` names it
    agent = spawn(settings, tmp_path / "agent.log", "agent", env=env)
    try:
        wait_for(lambda: health_here(settings, env).returncode == 0, timeout=60, what="the agent's heartbeat")
        argv = cli_argv(settings, "watch", "exp02", "--log", str(log), "--pid", str(training.pid))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env})
    finally:
        stop_process(agent)
        training.kill()
        training.wait()
    assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "agent.log").read_text()
    assert done.stdout.startswith(f"watching exp02 on {HOST}: log {log}")
    assert admin.acl_log() == []


def test_health_here_names_a_wrong_password_with_its_fix(central: Central, admin: redis.Redis, tmp_path: Path) -> None:
    done = health_here(agent_settings(tmp_path), gpu_env(tmp_path, central.url(AGENT_USER, WRONG)))
    assert done.returncode == 1
    failed = line(done.stdout, "FAIL redis:")
    masked = f"rediss://{AGENT_USER}:***@127.0.0.1:{central.tls_port}/0"
    assert masked in failed and "refused the credentials" in failed and "; fix: the user and password" in failed
    assert WRONG not in done.stdout + done.stderr


def test_health_here_names_a_missing_ca_with_its_fix(central: Central, admin: redis.Redis, tmp_path: Path) -> None:
    done = health_here(agent_settings(tmp_path), gpu_env(tmp_path, central.url(AGENT_USER, AGENT_PASSWORD, ca=False)))
    assert done.returncode == 1
    failed = line(done.stdout, "FAIL redis:")
    assert "certificate verify failed" in failed and "; fix: name the CA" in failed and "ssl_ca_certs=" in failed


@pytest.mark.parametrize(
    ("rule", "missing"),
    [
        (agent_acl_rule(Keys(), HOST).replace(" +xread", ""), f"XREAD tw:agent:{{{HOST}}}:control"),
        (agent_acl_rule(Keys(), "gpu2"), f"HSET tw:beat:agent@{HOST}"),  # another server's rule
        (agent_acl_rule(Keys(), HOST).replace(" +evalsha", ""), "EVALSHA tw:{RUN}:log"),
    ],
)
def test_health_here_names_a_right_the_user_lacks(
    central: Central, admin: redis.Redis, tmp_path: Path, rule: str, missing: str
) -> None:
    admin.execute_command("ACL", "SETUSER", "agent-lacking", "reset", "on", f">{AGENT_PASSWORD}", *rule.split())
    try:
        done = health_here(agent_settings(tmp_path), gpu_env(tmp_path, central.url("agent-lacking", AGENT_PASSWORD)))
    finally:
        admin.execute_command("ACL", "DELUSER", "agent-lacking")
    assert done.returncode == 1, done.stdout
    assert line(done.stdout, "OK   redis:")
    failed = line(done.stdout, "FAIL acl:")
    assert failed.startswith(f"FAIL acl: user agent-lacking may not run {missing} (")
    assert f"; fix: give it the agent's rule: ACL SETUSER agent-lacking {agent_acl_rule(Keys(), HOST)} " in failed
    assert AGENT_PASSWORD not in done.stdout + done.stderr


def tunnel_argv(ssh: SshServer, local: int, remote: int) -> list[str]:
    """The shipped tunnel unit's ExecStart, with the test sshd's key, known_hosts, port and user."""
    unit = (DEPLOY / "trainwarden-redis-tunnel.service").read_text()
    (start,) = [x.partition("=")[2] for x in unit.splitlines() if x.startswith("ExecStart=")]
    argv = shlex.split(start)
    swap = {"/etc/trainwarden/tunnel_ed25519": str(ssh.user_key),
            "UserKnownHostsFile=/etc/trainwarden/tunnel_known_hosts": f"UserKnownHostsFile={ssh.known_hosts}",
            "127.0.0.1:6380:127.0.0.1:6380": f"127.0.0.1:{local}:127.0.0.1:{remote}",
            "tunnel@central.lab": f"{ssh.user}@127.0.0.1"}  # fmt: skip
    assert set(swap) <= set(argv), argv
    return [*(swap.get(a, a) for a in argv[:-1]), "-p", str(ssh.port), swap[argv[-1]]]


def test_health_here_through_the_shipped_ssh_tunnel(central: Central, admin: redis.Redis, tmp_path: Path) -> None:
    (tmp_path / "sshd").mkdir()
    ssh = SshServer(tmp_path / "sshd")
    local = free_port()
    with open(tmp_path / "tunnel.log", "wb") as log:
        tunnel = subprocess.Popen(tunnel_argv(ssh.start(), local, central.tls_port), stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=log)  # fmt: skip
    try:
        url = central.url(AGENT_USER, AGENT_PASSWORD).replace(f":{central.tls_port}/", f":{local}/")
        env = gpu_env(tmp_path, url)
        settings = agent_settings(tmp_path)
        wait_for(lambda: "OK   redis:" in health_here(settings, env).stdout, timeout=30, what="the tunnel")
        done = health_here(settings, env)
    finally:
        tunnel.terminate()
        tunnel.wait(timeout=30)
        ssh.stop()
        print("--- tunnel.log\n" + (tmp_path / "tunnel.log").read_text(errors="replace"))
    assert line(done.stdout, "OK   redis:").startswith(f"OK   redis: rediss://{AGENT_USER}:***@127.0.0.1:{local}/0")
    assert line(done.stdout, "OK   acl:")
    assert f"no daemon on {HOST} has sent a heartbeat" in done.stdout and done.returncode == 1  # no agent runs here
