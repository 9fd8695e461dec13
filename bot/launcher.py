"""/launch through the remote launcher (W&B guard, preflight, SSH, tmux on the experiment's server)."""

from __future__ import annotations

from trainwarden.events.envelope import Event
from trainwarden.remote.launch import RemoteLauncher


class FleetLauncher:
    def __init__(self, launcher: RemoteLauncher) -> None:
        self.launcher = launcher

    def launch(self, experiment: str, *, user: str) -> Event:
        """`run.launched` carries `requested_by`, so the notifier announces it in the run's thread."""
        return self.launcher.launch(experiment, extra={"requested_by": user})
