"""SSH to the GPU servers with asyncssh, behind a small synchronous interface.

The workers are synchronous (RQ jobs), asyncssh is asynchronous: `SshPool` runs one event loop
in a background thread and keeps one connection per server, reconnecting when one drops. Host
keys are always checked against known_hosts; an unknown or changed key refuses the connection.
Commands are strings the caller built with `shlex.quote`/`shlex.join` from validated config.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import posixpath
import threading
import warnings
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from trainwarden.remote.errors import HostKeyRejected, SshAuthFailed, SshError, SshTimeout, SshUnreachable
from trainwarden.remote.fleet import Server

with warnings.catch_warnings():  # cryptography 47+ deprecates DSA, which asyncssh touches: noise, not ours
    warnings.filterwarnings("ignore", message="DSA is deprecated")
    import asyncssh

T = TypeVar("T")
DEFAULT_COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class RemoteShell(Protocol):
    def run(self, server: Server, command: str, *, timeout: float = DEFAULT_COMMAND_TIMEOUT_S,
            stdin: str | None = None) -> CommandResult: ...  # fmt: skip

    def write_files(
        self, server: Server, files: Mapping[str, tuple[bytes, int]], *, remove: Sequence[str] = ()
    ) -> None: ...


def known_hosts_path(server: Server) -> Path:
    return server.known_hosts or Path("~/.ssh/known_hosts").expanduser()


class SshPool:
    """One connection per server, shared by every job in this process."""

    def __init__(self) -> None:
        self._pid = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[str, asyncssh.SSHClientConnection] = {}
        self._lock = threading.Lock()

    # -- the event loop thread -------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # new process (RQ forks work horses)
                self._pid = os.getpid()
                self._connections = {}
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="ssh-pool", daemon=True)
                self._thread.start()
            return self._loop

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        try:
            return future.result(timeout=timeout + 5)
        except TimeoutError:
            future.cancel()
            raise SshTimeout(f"no answer within {timeout:.0f}s") from None
        except concurrent.futures.CancelledError:  # close() cancelled it: say so now, not after the timeout
            raise SshError("the SSH connections were closed (the process is shutting down)") from None

    # -- connections -----------------------------------------------------------------------------

    async def _connect(self, server: Server) -> asyncssh.SSHClientConnection:
        conn = self._connections.get(server.name)
        if conn is not None and not conn.is_closed():
            return conn
        known_hosts = known_hosts_path(server)
        where = f"{server.user}@{server.host}:{server.port}"
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    server.host,
                    port=server.port,
                    username=server.user,
                    client_keys=[str(server.key_file)] if server.key_file else (),
                    known_hosts=str(known_hosts),
                    config=None,
                    keepalive_interval=30,
                ),
                timeout=server.connect_timeout_s,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise HostKeyRejected(
                f"host key of {server.host}:{server.port} is not trusted by {known_hosts} (unknown, or it changed: "
                f"{exc.reason}). Check the key's fingerprint with the server's admin, then add it, e.g. "
                f"`ssh-keyscan -p {server.port} {server.host} >> {known_hosts}`",
                server=server.name,
            ) from None
        except asyncssh.PermissionDenied:
            raise SshAuthFailed(
                f"{where} refused our key ({server.key_file or 'default keys'}); "
                "check user and key_file in servers.yaml",
                server=server.name,
            ) from None
        except TimeoutError:
            raise SshUnreachable(
                f"{where}: no SSH answer within {server.connect_timeout_s:.0f}s; check host and port "
                "in servers.yaml and that the server is up",
                server=server.name,
            ) from None
        except (OSError, asyncssh.Error) as exc:
            raise SshUnreachable(
                f"{where}: cannot connect: {exc}; check host and port in servers.yaml and that sshd runs there",
                server=server.name,
            ) from exc
        self._connections[server.name] = conn
        return conn

    async def _run(self, server: Server, command: str, timeout: float, stdin: str | None) -> CommandResult:
        for attempt in (1, 2):
            conn = await self._connect(server)
            try:
                done = await conn.run(command, input=stdin, timeout=timeout, check=False)
            except asyncssh.TimeoutError:
                raise SshTimeout(f"command did not finish within {timeout:.0f}s: {command[:120]}",
                                 server=server.name) from None  # fmt: skip
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, asyncssh.ChannelOpenError, OSError) as exc:
                self._connections.pop(server.name, None)
                if attempt == 2:
                    raise SshUnreachable(f"connection to {server.host} lost: {exc}", server=server.name) from exc
                continue
            status = done.exit_status if done.exit_status is not None else 255
            return CommandResult(status, _text(done.stdout), _text(done.stderr))
        raise SshError("unreachable")  # for type checkers; the loop returns or raises

    async def _write(self, server: Server, files: Mapping[str, tuple[bytes, int]], remove: Sequence[str]) -> None:
        conn = await self._connect(server)
        async with conn.start_sftp_client() as sftp:
            for path in remove:
                with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                    await sftp.remove(path)
            for path, (data, mode) in files.items():
                await sftp.makedirs(posixpath.dirname(path), exist_ok=True)
                tmp = f"{path}.tmp-{os.getpid()}"
                async with sftp.open(tmp, "wb", attrs=asyncssh.SFTPAttrs(permissions=mode)) as f:
                    await f.write(data)
                await sftp.chmod(tmp, mode)
                await sftp.posix_rename(tmp, path)

    # -- the synchronous interface ---------------------------------------------------------------

    def run(self, server: Server, command: str, *, timeout: float = DEFAULT_COMMAND_TIMEOUT_S,
            stdin: str | None = None) -> CommandResult:  # fmt: skip
        return self._call(self._run(server, command, timeout, stdin), timeout + server.connect_timeout_s)

    def write_files(
        self, server: Server, files: Mapping[str, tuple[bytes, int]], *, remove: Sequence[str] = ()
    ) -> None:
        """Over one SFTP session: remove `remove` (if present), then write each file atomically (temp
        file + rename, parent dirs created) with its mode set before any byte is written."""
        try:
            self._call(self._write(server, files, remove), 60.0)
        except asyncssh.SFTPError as exc:
            raise SshError(
                f"cannot write files on {server.name}: {exc.reason}; check that {server.user} may write there",
                server=server.name,
            ) from exc

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            if loop is None or self._pid != os.getpid():
                return
            self._loop = None  # a call from now on starts a fresh loop instead of queueing on this one

        async def close_all() -> None:
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()  # a caller still waiting in _call hears at once that the pool closed
            for conn in self._connections.values():
                conn.close()
                await conn.wait_closed()
            self._connections.clear()

        asyncio.run_coroutine_threadsafe(close_all(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        late = asyncio.all_tasks(loop)  # calls queued while it stopped: never run, so cancel them too
        for task in late:
            task.cancel()
        if late:
            loop.run_until_complete(asyncio.gather(*late, return_exceptions=True))
        loop.close()


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
