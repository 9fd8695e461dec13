"""Stopping runs on configured servers over SSH: the same stop script as on this host, one round trip."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from trainwarden.remote.errors import SshError
from trainwarden.remote.fleet import Server
from trainwarden.remote.runscript import activation
from trainwarden.remote.ssh import RemoteShell
from trainwarden.remote.stop import (
    NO_WAY_TO_STOP,
    StopResult,
    StopTarget,
    judge_stop_command,
    parse_stop,
    running_script,
    stop_script,
)

STOP_COMMAND_TIMEOUT_S = 120.0
SLACK_S = 30.0  # on top of the grace period, for the round trip and tmux


class SshController:
    def __init__(self, *, shell: RemoteShell, servers: Mapping[str, Server]) -> None:
        self.shell = shell
        self.servers = servers

    def _server(self, target: StopTarget) -> Server:
        server = self.servers.get(target.server or "")
        if server is None:
            raise SshError(
                f"run {target.run} is on server {target.server!r}, which servers.yaml does not define: "
                "add the server there (or stop the run by hand)"
            )
        return server

    def stop(self, target: StopTarget) -> StopResult:
        try:
            server = self._server(target)
            if target.stop_command:
                cd = f"cd {shlex.quote(target.workdir)} && " if target.workdir else ""
                command = f"{cd}{activation(server)} && {shlex.join(target.stop_command)}"
                done = self.shell.run(server, command, timeout=STOP_COMMAND_TIMEOUT_S)
                return judge_stop_command(done.exit_status, done.stderr)
            if not target.session:
                return StopResult(False, "none", NO_WAY_TO_STOP)
            script = stop_script(socket=target.tmux_socket, session=target.session, grace_s=target.grace_s,
                                 pid=target.pid)  # fmt: skip
            done = self.shell.run(server, script, timeout=target.grace_s + SLACK_S)
            return parse_stop(done.stdout, done.stderr, session=target.session, grace_s=target.grace_s,
                              socket=target.tmux_socket)  # fmt: skip
        except SshError as exc:
            return StopResult(False, "ssh", str(exc))

    def is_running(self, target: StopTarget) -> bool:
        if not target.session:
            return False
        done = self.shell.run(self._server(target), running_script(target.tmux_socket, target.session), timeout=30)
        return done.stdout.startswith("RUNNING")
