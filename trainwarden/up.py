"""`trainwarden up`: the agent, dispatcher, worker and bot of a one-machine install, as children of one command.

Each daemon is the same `python -m trainwarden ROLE` a supervisor would start, with the same
`--config`, `--redis-url` and `--log-level`. Their output goes to one file each under
DATA_DIR/logs/ and, prefixed with the daemon's name, to this console (the bot's console notifier
included: the alerts show up here). Ctrl-C (SIGINT) or SIGTERM stops them all with SIGTERM, as a
supervisor would, and waits for them; a second Ctrl-C kills them at once. SIGHUP is passed on to each
daemon, which reloads what it can (trainwarden/reload.py) and goes on; so a closed terminal stops
nothing either (the daemons' logs go on in their files). (A SIGKILL of `up`
itself leaves them running, as it would under any supervisor.)

A daemon that exits on its own is reported and `up` stops the others and exits 1, rather than
restarting it: a crash loop would hide the cause (a wrong Redis URL, a missing extra) behind
restarts. For restarts run `up` (or each daemon) under systemd or another supervisor.

`--redis` starts a redis-server with AOF in DATA_DIR/redis when none answers at a local URL, and
keeps it: killed, it is started again on the same data (trainwarden/redis_keeper.py); when it cannot
be, `up` stops the daemons and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

from trainwarden import logsetup, metrics_server, wiring
from trainwarden.core.errors import UpError
from trainwarden.core.redact import redact_text
from trainwarden.events import health
from trainwarden.events.errors import StoreError
from trainwarden.events.heartbeat import component_name, read_beats
from trainwarden.events.lease import process_alive
from trainwarden.events.store import EventStore
from trainwarden.redis_keeper import RedisKeeper
from trainwarden.settings import LOGS_DIR, REDIS_DIR, Settings
from trainwarden.tools.redis_server import RedisServer

DAEMONS = ("agent", "dispatcher", "worker", "bot")
SINGLE = ("agent", "notifier")  # one per host (it would adopt the same runs) / one per deployment (its consumer name)
BEAT_ROLE = {"bot": "notifier"}  # the role a daemon's heartbeat is written under, where it differs from its name
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
STOP_GRACE_S = 30.0  # seconds a daemon has to finish what it is doing after SIGTERM, before SIGKILL
READY_TIMEOUT_S = 60.0  # seconds to wait for every daemon's first heartbeat before saying they are slow
POLL_S = 0.1
PREFIX_WIDTH = max(len(n) for n in DAEMONS)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("up", help="run the agent, dispatcher, worker and bot on this machine; Ctrl-C stops them all")
    s.add_argument("--redis", action="store_true", help="start a redis-server (AOF on, data in DATA_DIR/redis) "
                   "when none answers at the Redis URL and that URL is on this machine")  # fmt: skip
    s.add_argument("--logs", type=Path, metavar="DIR", help="where each daemon's log goes (default: DATA_DIR/logs)")
    order = ", ".join(f"{name} on BASE+{i}" for i, name in enumerate(DAEMONS))
    s.add_argument("--metrics-port", type=int, metavar="BASE",
                   help=f"serve each daemon's /metrics, /healthz and /readyz: {order} (off by default)")  # fmt: skip
    s.add_argument("--metrics-host", default=metrics_server.HOST, metavar="ADDR",
                   help=f"address the daemons' endpoints bind (default {metrics_server.HOST})")  # fmt: skip
    s.set_defaults(func=cmd_up)


@dataclass(slots=True)
class Child:
    name: str
    argv: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    pump: threading.Thread | None = None


@dataclass(slots=True)
class Supervisor:
    """Child processes with their output in one file each and, prefixed, on `out`."""

    children: list[Child]
    out: TextIO
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    lock: threading.Lock = field(default_factory=threading.Lock)
    console: bool = True  # False once `out` cannot be written: a pump that died there would block its daemon
    json_log: bool = False  # --log-format json: the console is JSON lines too, without name prefixes

    def say(self, name: str, text: str) -> None:
        line = console_line(name, text) if self.json_log else f"{name:<{PREFIX_WIDTH}} | {text}"
        with self.lock:
            if self.console:
                try:
                    print(line, file=self.out, flush=True)
                except (OSError, ValueError):  # the console went away (a closed pipe, a hung-up terminal)
                    self.console = False  # the log files go on

    def start(self) -> None:
        for child in self.children:
            child.log_path.parent.mkdir(parents=True, exist_ok=True)
            child.proc = subprocess.Popen(
                child.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True,  # the terminal's Ctrl-C reaches `up` only; it stops each child once
                env={**self.env, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
            child.pump = threading.Thread(target=self._pump, args=(child,), name=f"up-{child.name}", daemon=True)
            child.pump.start()

    def _pump(self, child: Child) -> None:
        assert child.proc is not None and child.proc.stdout is not None
        stream: IO[bytes] = child.proc.stdout
        with stream, open(child.log_path, "ab") as log:
            log.write(f"{start_line(child)}\n".encode())
            for line in iter(stream.readline, b""):
                log.write(line)
                log.flush()
                self.say(child.name, line.decode("utf-8", "replace").rstrip("\n"))

    def exited(self) -> Child | None:
        """The first child that is no longer running."""
        return next((c for c in self.children if c.proc is not None and c.proc.poll() is not None), None)

    def run(self, *, stop: threading.Event, hurry: threading.Event, news: Callable[[], str | None],
            grace_s: float = STOP_GRACE_S, hup: threading.Event | None = None,
            fatal: Callable[[], str | None] = lambda: None) -> int:  # fmt: skip
        """Until `stop`, a child's exit or `fatal()` says why not to go on; then stop the others. 1 when a child
        exited on its own or on `fatal`, else 0. Each time `hup` is set, SIGHUP goes to every running child."""
        dead = why = None
        while not stop.is_set():
            if (dead := self.exited()) is not None or (why := fatal()) is not None:
                break
            if hup is not None and hup.is_set():
                hup.clear()
                self.say("up", f"SIGHUP: passed on to {self.signal_all(signal.SIGHUP)} to reload")
            if (said := news()) is not None:
                self.say("up", said)
            stop.wait(POLL_S)
        if dead is not None and dead.proc is not None:
            self.say("up", f"{dead.name} exited with status {dead.proc.returncode} (its log: {dead.log_path}); "
                           "stopping the others")  # fmt: skip
        elif why is not None:
            self.say("up", f"{why}; stopping the daemons")
        else:
            self.say("up", "stopping the daemons (Ctrl-C again kills them at once)")
        self.stop(hurry=hurry, grace_s=grace_s)
        statuses = ", ".join(f"{c.name} {c.proc.returncode}" for c in self.children if c.proc is not None)
        self.say("up", f"all stopped (exit statuses: {statuses})")
        return 1 if dead is not None or why is not None else 0

    def signal_all(self, sig: signal.Signals) -> str:
        """Send `sig` to each running child; their names."""
        sent = []
        for child in self.children:
            if child.proc is not None and child.proc.poll() is None:
                child.proc.send_signal(sig)
                sent.append(child.name)
        return ", ".join(sent) or "no daemon"

    def stop(self, *, hurry: threading.Event, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to each running child, then wait; SIGKILL (to its process group) after `grace_s` or on `hurry`."""
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for child in running:
            assert child.proc is not None
            child.proc.terminate()
        deadline = time.monotonic() + grace_s
        while any(c.proc is not None and c.proc.poll() is None for c in running):
            if hurry.is_set() or time.monotonic() > deadline:
                for child in running:
                    if child.proc is not None and child.proc.poll() is None:
                        self.say("up", f"killing {child.name} (pid {child.proc.pid})")
                        os.killpg(child.proc.pid, signal.SIGKILL)
                        child.proc.wait()
                break
            time.sleep(POLL_S / 2)
        for child in self.children:
            if child.pump is not None:
                child.pump.join(timeout=5)


def console_line(name: str, text: str) -> str:
    """Pure: one JSON line on `up`'s console: a daemon's own JSON line as it is; up's words, or a line a
    daemon wrote outside its log (a crash's traceback, a startup error), as a record of its own."""
    if name != "up" and text.startswith("{"):
        try:
            if isinstance(json.loads(text), dict):
                return text
        except ValueError:
            pass
    return logsetup.json_line(name, text, logger="trainwarden.up" if name == "up" else "stderr")


def start_line(child: Child) -> str:
    """The line `up` writes into a daemon's log file as it starts it, in the daemon's log format."""
    pid = child.proc.pid if child.proc is not None else None
    argv = child.argv
    if "--log-format" in argv and argv[argv.index("--log-format") + 1] == "json":
        return logsetup.json_line("up", f"{child.name} started by trainwarden up, pid {pid}", logger=__name__)
    return f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} started by trainwarden up, pid {pid}"


def daemon_argv(args: argparse.Namespace, name: str) -> list[str]:
    """The command a supervisor would run for daemon `name`, with this command's global options."""
    argv = [sys.executable, "-m", "trainwarden"]
    if args.config is not None:
        argv += ["--config", str(Path(args.config).resolve())]
    if args.redis_url:
        argv += ["--redis-url", args.redis_url]
    argv += ["--log-level", args.log_level, "--log-format", getattr(args, "log_format", "text"), name]
    if (port := metrics_port(args, name)) is not None:
        argv += ["--metrics-port", str(port), "--metrics-host", args.metrics_host]
    return argv


def metrics_port(args: argparse.Namespace, name: str) -> int | None:
    """Daemon `name`'s endpoint port under `--metrics-port BASE`: BASE + its place in DAEMONS."""
    base = getattr(args, "metrics_port", None)
    return None if base is None else base + DAEMONS.index(name)


def local_redis(url: str) -> tuple[int, str | None] | None:
    """(port, password) when `url` names a plain Redis on this machine that `--redis` may start; else None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "redis" or parts.hostname not in LOCAL_HOSTS or parts.username:
        return None
    try:
        return parts.port or 6379, parts.password
    except ValueError:  # not a port number: events/connect.py says what is wrong with the URL
        return None


def answers(settings: Settings) -> bool:
    client = wiring.events_redis(settings)
    try:
        return health.answers(client)  # refused credentials raise: said in one line by the CLI
    finally:
        client.close()


def ensure_redis(settings: Settings, *, start: bool, say: Callable[[str], None]) -> RedisServer | None:
    """Check that Redis answers; with `start`, start a redis-server (AOF on) in DATA_DIR/redis when it does not."""
    if answers(settings):
        return None
    directory = settings.data_dir / REDIS_DIR
    local = local_redis(settings.redis_url)
    where = redact_text(settings.redis_url)
    if local is None:
        raise UpError(f"no Redis answers at {where}: start it there (AOF on), or point REDIS_URL at one that runs")
    if not start:
        raise UpError(
            f"no Redis answers at {where}: `trainwarden up --redis` starts one, or run one with AOF on: "
            f"redis-server --port {local[0]} --appendonly yes --dir {directory}"
        )
    port, password = local
    server = RedisServer(directory, port=port, password=password, own_session=True).start()
    pid = server.process.pid if server.process is not None else None
    say(f"started redis-server on port {port} (pid {pid}), AOF on, data in {directory}")
    return server


def already_running(store: EventStore, host: str) -> list[str]:
    """The single-instance daemons (an agent for `host`, the bot) that beat recently from a live local pid, named
    as `up` names its children (the bot's heartbeat is written under the role `notifier`)."""
    now = time.time()
    daemon = {role: name for name, role in BEAT_ROLE.items()}
    found = []
    for beat in read_beats(store.redis, store.keys):  # type: ignore[arg-type]
        mine = beat.role == "notifier" or beat.host == host
        running = beat.stopped_at is None and not beat.silent(now) and process_alive(beat.pid)
        if beat.role in SINGLE and mine and running:
            found.append(f"{daemon.get(beat.role, beat.role)} (pid {beat.pid} on {beat.host})")
    return found


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    stop, hurry, hup = threading.Event(), threading.Event(), threading.Event()

    def on_signal(*_: object) -> None:
        (hurry if stop.is_set() else stop).set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    signal.signal(signal.SIGHUP, lambda *_: hup.set())  # passed on by the supervisor's loop: see the docstring
    logs = (args.logs or settings.data_dir / LOGS_DIR).resolve()
    children = [Child(name, daemon_argv(args, name), logs / f"{name}.log") for name in DAEMONS]
    supervisor = Supervisor(children, out=sys.stdout, json_log=getattr(args, "log_format", "text") == "json")
    supervisor.say("up", f"data directory: {settings.data_dir} (evidence, findings.md, agent state)")
    server = ensure_redis(settings, start=args.redis, say=lambda text: supervisor.say("up", text))
    try:
        store = wiring.store(settings)
        running = already_running(store, settings.host)
        store.redis.close()
        if running:
            raise UpError(f"already running here: {', '.join(running)}; stop it first (another `trainwarden up`, "
                          "a daemon started by hand or by systemd): two would follow the same runs")  # fmt: skip
        keeper = None if server is None else RedisKeeper(server, say=lambda text: supervisor.say("up", text))
        return _supervise(supervisor, settings, logs, stop=stop, hurry=hurry, hup=hup, keeper=keeper)
    finally:
        if server is not None:
            server.stop()
            supervisor.say("up", "redis-server stopped")


def _supervise(supervisor: Supervisor, settings: Settings, logs: Path, *, stop: threading.Event,
               hurry: threading.Event, hup: threading.Event, keeper: RedisKeeper | None = None) -> int:  # fmt: skip
    supervisor.start()
    started = ", ".join(f"{c.name} (pid {c.proc.pid})" for c in supervisor.children if c.proc is not None)
    supervisor.say("up", f"started {started}; logs in {logs}/NAME.log")
    if endpoints := [f"{c.name} {metrics_url(c.argv)}" for c in supervisor.children if "--metrics-port" in c.argv]:
        supervisor.say("up", f"metrics, /healthz and /readyz: {', '.join(endpoints)}")
    ready = Readiness(wiring.store(settings), settings.host, supervisor.children)
    try:
        fatal = keeper.check if keeper is not None else lambda: None
        return supervisor.run(stop=stop, hurry=hurry, news=ready.check, hup=hup, fatal=fatal)
    finally:
        ready.store.redis.close()


def metrics_url(argv: list[str]) -> str:
    """Pure: the /metrics URL a daemon's command line serves."""
    host, port = argv[argv.index("--metrics-host") + 1], argv[argv.index("--metrics-port") + 1]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"


@dataclass(slots=True)
class Readiness:
    """Whether every child has written its heartbeat under its own pid: said once, or that some are late."""

    store: EventStore
    host: str
    children: list[Child]
    done: bool = False
    deadline: float = field(default_factory=lambda: time.monotonic() + READY_TIMEOUT_S)

    def check(self) -> str | None:
        if self.done:
            return None
        try:
            pids = {b.component: b.pid for b in read_beats(self.store.redis, self.store.keys)}  # type: ignore[arg-type]
        except StoreError:
            pids = {}
        late = [c.name for c in self.children if c.proc is not None
                and pids.get(component_name(BEAT_ROLE.get(c.name, c.name), self.host)) != c.proc.pid]  # fmt: skip
        if not late:
            self.done = True
            return "all four daemons are running (each sent its heartbeat); Ctrl-C stops them"
        if time.monotonic() > self.deadline:
            self.done = True
            return f"no heartbeat yet from {', '.join(late)} after {READY_TIMEOUT_S:.0f}s: see their logs"
        return None
