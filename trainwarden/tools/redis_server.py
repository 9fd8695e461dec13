"""Start a private redis-server on a free loopback port (the demo and the tests use it)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from trainwarden.core.errors import RedisServerError

START_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 5


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server with AOF on (`appendfsync everysec`), data in `directory`, bound to 127.0.0.1."""

    def __init__(self, directory: Path, *, port: int | None = None, extra_args: list[str] | None = None,
                 password: str | None = None, own_session: bool = False,
                 config: Path | None = None) -> None:  # fmt: skip
        self.directory = Path(directory)
        self.config = config  # a redis.conf read first: the options below override it
        self.port = port
        self.extra_args = extra_args or []
        self.password = password  # requirepass: clients and the URL carry it
        self.own_session = own_session  # out of the terminal's process group: a Ctrl-C there does not reach it
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self, **kwargs: Any) -> redis.Redis:
        if self.port is None:  # no port given: one is picked by start()
            raise RedisServerError("this redis-server has no port yet: start() it before asking for a client")
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **kwargs)

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisServerError(
                "redis-server not found on PATH; install it (Debian: sudo apt-get install redis-server) "
                "or run ./dev.sh, which installs it"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        fixed = self.port is not None
        for _ in range(1 if fixed else PORT_ATTEMPTS):
            port = self.port if fixed else free_port()
            assert port is not None
            if self._spawn(binary, port):
                self.port = port
                return self
        log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
        raise RedisServerError(f"redis-server did not start in {self.directory}; its log ends with:\n{log}")

    def _spawn(self, binary: str, port: int) -> bool:
        args = [
            binary,
            *([str(self.config)] if self.config else []),
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
            *(["--requirepass", self.password] if self.password else []),
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        start_new_session=self.own_session)  # fmt: skip
        # no retries of its own (redis-py's default backs off for seconds): this loop retries, and sees an exit
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, password=self.password,
                             retry=Retry(NoBackoff(), 0))  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return False
                try:
                    if client.ping():
                        return True
                except (redis.ConnectionError, redis.TimeoutError):  # not up yet, or another process holds the port
                    time.sleep(0.02)
            self.stop()
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisClusterServers:
    """A Redis Cluster of `masters` cluster-enabled redis-servers on 127.0.0.1, no replicas (tests, benches)."""

    def __init__(self, directory: Path, *, masters: int = 3) -> None:
        self.directory = Path(directory)
        cluster_args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", "5000"]  # fmt: skip
        self.servers = [RedisServer(self.directory / f"node{i}", extra_args=cluster_args) for i in range(masters)]

    @property
    def url(self) -> str:
        """What trainwarden's settings take: any node's address under the cluster scheme."""
        return f"redis+cluster://127.0.0.1:{self.servers[0].port}/0"

    def start(self) -> RedisClusterServers:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RedisServerError("redis-cli not found on PATH (Debian: apt-get install redis-tools)")
        for server in self.servers:
            server.start()
        nodes = [f"127.0.0.1:{s.port}" for s in self.servers]
        done = subprocess.run([cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        if done.returncode != 0:
            self.stop()
            raise RedisServerError(f"redis-cli --cluster create failed: {done.stdout[-1500:]}{done.stderr[-500:]}")
        deadline = time.monotonic() + START_TIMEOUT_S * 3
        while time.monotonic() < deadline:
            infos = [s.client().cluster("info") for s in self.servers]
            if all(info.get("cluster_state") == "ok" for info in infos):
                return self
            time.sleep(0.05)
        self.stop()
        raise RedisServerError(f"the cluster in {self.directory} did not reach cluster_state:ok")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def __enter__(self) -> RedisClusterServers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
