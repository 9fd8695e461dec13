"""Stopping runs on configured servers over SSH (the same procedure as on this host)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from workers.errors import SshError
from workers.fleet import Server
from workers.runscript import activation
from workers.ssh import RemoteShell
from workers.transport import StopResult, StopTarget, Tmux, has_session, judge_stop_command, stop_session, tmux_argv

STOP_COMMAND_TIMEOUT_S = 120.0


class SshController:
    def __init__(self, *, shell: RemoteShell, servers: Mapping[str, Server]) -> None:
        self.shell = shell
        self.servers = servers

    def _server(self, target: StopTarget) -> Server:
        server = self.servers.get(target.server or "")
        if server is None:
            raise SshError(f"run {target.run} is on server {target.server!r}, which servers.yaml does not define")
        return server

    def tmux(self, server: Server, socket: str | None) -> Tmux:
        def run(args: Sequence[str]) -> tuple[int, str]:
            done = self.shell.run(server, shlex.join(tmux_argv(socket, *args)), timeout=30)
            return done.exit_status, done.stderr

        return run

    def stop(self, target: StopTarget) -> StopResult:
        try:
            server = self._server(target)
            if target.stop_command:
                cd = f"cd {shlex.quote(target.workdir)} && " if target.workdir else ""
                command = f"{cd}{activation(server)} && {shlex.join(target.stop_command)}"
                done = self.shell.run(server, command, timeout=STOP_COMMAND_TIMEOUT_S)
                return judge_stop_command(done.exit_status, done.stderr)
            if not target.session:
                return StopResult(False, "none", "the run has no tmux session or stop_command recorded in run.launched")
            return stop_session(self.tmux(server, target.tmux_socket), target.session, grace_s=target.grace_s)
        except SshError as exc:
            return StopResult(False, "ssh", str(exc))

    def is_running(self, target: StopTarget) -> bool:
        server = self._server(target)
        return bool(target.session) and has_session(self.tmux(server, target.tmux_socket), target.session or "")
