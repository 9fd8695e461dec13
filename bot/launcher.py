"""/launch on the bot's own host, through the local tmux launcher (remote runs come with SSH)."""

from __future__ import annotations

from bot.config import Experiment
from events.envelope import Event
from events.store import EventStore
from workers.launch import LaunchSpec, launch_local


class LocalLauncher:
    def __init__(self, *, store: EventStore, host: str, tmux_socket: str | None = None) -> None:
        self.store = store
        self.host = host
        self.tmux_socket = tmux_socket

    def launch(self, experiment: Experiment, *, server: str, user: str) -> Event:
        spec = LaunchSpec(
            run=experiment.name,
            command=experiment.command,
            workdir=experiment.workdir,
            log_path=experiment.log or experiment.workdir / f"{experiment.name}.log",
            tmux_socket=self.tmux_socket,
            config={"experiment": experiment.name, "requested_by": user, "server": server},
        )
        return launch_local(spec, store=self.store, host=self.host)
