"""The one spelling of a tmux command line for a run's tmux server (stdlib only; every process uses it).

A run lives on the tmux server it was launched on, and that is the only server asked about it. A
launch records the server's socket as an absolute path (what tmux itself reports), addressed with
`-S`; a socket name given by a user (`--tmux-socket`, `tmux_socket:` in servers.yaml) with `-L`.
tmux is never run with an inherited `$TMUX`: a daemon started inside one tmux server (`trainwarden
up` in a tmux window) would otherwise ask that server about a run that lives on another one, find
nothing, and take the run for dead or its stop for done. A record without a socket means the
user's default server.

This module is a leaf open to every package, like `trainwarden.core.sidecar`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

UNSET_TMUX = "unset TMUX"  # the same, for a shell script (a stop over SSH)


def tmux_argv(socket: str | None, *args: str) -> list[str]:
    """`tmux` on `socket`: `-S` for a path, `-L` for a name, neither for the default server."""
    if not socket:
        return ["tmux", *args]
    return ["tmux", "-S" if "/" in socket else "-L", socket, *args]


def server_words(socket: str | None) -> str:
    """The server as a message names it: `tmux server SOCKET`, or `the default tmux server`."""
    return f"tmux server {socket}" if socket else "the default tmux server"


def tmux_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a tmux command about a run: this one without `$TMUX`."""
    return {k: v for k, v in (os.environ if environ is None else environ).items() if k != "TMUX"}
