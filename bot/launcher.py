"""/launch through the remote launcher (plans, W&B guard, preflight, SSH, tmux on the experiment's server)."""

from __future__ import annotations

from trainwarden.bot import replies
from trainwarden.events.envelope import Event
from trainwarden.remote.first_seconds import WINDOW_S
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.plan_gate import plan_refusal


class FleetLauncher:
    def __init__(self, launcher: RemoteLauncher) -> None:
        self.launcher = launcher

    def launch(self, experiment: str, *, user: str, force: bool = False, check_s: float = WINDOW_S) -> Event:
        """`run.launched` carries `requested_by`, so the notifier announces it in the run's thread;
        `force` launches what a plan holds back, recorded as `forced` by that user. Then the first
        seconds are watched as `trainwarden launch` watches them: a command that ends at once is
        recorded then (`run.failed` with its exit code and last lines, posted as FAILED in the thread),
        not when an agent on that server happens to notice."""
        launched = self.launcher.launch(experiment, extra={"requested_by": user}, force=force, by=user)
        if check_s > 0:
            self.launcher.first_seconds(launched, within_s=check_s)
        return launched

    def held(self, experiment: str) -> str | None:
        """Asked before the reply to /launch, so a plan's refusal comes back to the user who asked."""
        hold = self.launcher.plan_hold(experiment)
        if hold is None:
            return None
        text = plan_refusal(hold, f"{replies.slash('launch')} {experiment} --force")
        self.launcher.refuse_held(hold, text)
        return text
