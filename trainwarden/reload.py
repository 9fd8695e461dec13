"""What each daemon reloads on SIGHUP (core/signals.py runs it), and the one line it logs.

- the agent: its settings file's `agent.watch` list (plus the `--watch` runs it was started with);
- a worker: its policy file (and announces it, as a job would: `policy.loaded` / `policy.rejected`);
- the bot: the `slack:` settings a running bot can take (bot/reconfigure.py: routes, channel, allow-lists,
  snoozes, flap collapse, dead-man's switch);
- the dispatcher: nothing (it says so and goes on).

A file that is invalid is refused in one line naming its file:line:column, and what is in force stays.
Any other setting that changed is named as taking effect at a restart, so nobody is left believing it did.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainwarden.core.errors import ConfigError, TrainwardenError
from trainwarden.settings import Settings

if TYPE_CHECKING:
    from trainwarden.agent.runner import Agent
    from trainwarden.agent.watch import RunWatch
    from trainwarden.bot.notifier import Notifier
    from trainwarden.bot.reconfigure import HasConfig
    from trainwarden.workers.context import WorkerContext

COUNT_RE = re.compile(r"^\d+ problems?:$")


def one_line(message: str) -> str:
    """An error of one or several `file:line:column: ...` lines as one line: the first problem, and how many more."""
    lines = [" ".join(line.split()) for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and COUNT_RE.match(lines[0]):  # "2 problems:" and one line each
        return lines[1] + (f" (and {len(lines) - 2} more)" if len(lines) > 2 else "")
    return " ".join(lines) or "(no detail)"  # one problem, its text wrapped


def changed(old: Settings, new: Settings, *, live: Sequence[str] = ()) -> list[str]:
    """The settings that differ, less the `live` ones the daemon reloads (`slack` stands for its subsection)."""
    return [f.name for f in dataclasses.fields(Settings)
            if f.name not in live and getattr(old, f.name) != getattr(new, f.name)]  # fmt: skip


def _restart_note(names: Sequence[str]) -> str:
    return f"; take effect at a restart: {', '.join(names)}" if names else ""


def _refused(exc: ConfigError) -> str:
    return f"refused the settings file, those in force stay: {one_line(str(exc))}"


@dataclass(slots=True)
class AgentReload:
    load: Callable[[], Settings]
    settings: Settings  # in force
    agent: Agent
    extra: tuple[RunWatch, ...] = ()  # the `--watch` runs of the command line

    def __call__(self) -> str:
        try:
            new = self.load()
        except ConfigError as exc:
            return _refused(exc)
        added, removed = self.agent.reconfigure([*new.watches, *self.extra])
        restart = changed(self.settings, new, live=("watches",))
        self.settings = new
        watches = " ".join([*(f"+{r}" for r in added), *(f"-{r}" for r in removed)]) or "unchanged"
        return f"reloaded its settings: watches {watches}{_restart_note(restart)}"


@dataclass(slots=True)
class WorkerReload:
    load: Callable[[], Settings]
    settings: Settings
    ctx: WorkerContext

    def __call__(self) -> str:
        from trainwarden.workers.process import record_policy_events

        before = self.ctx.policies.policy.hash
        said = self.ctx.policies.reload_now()
        record_policy_events(self.ctx)  # policy.loaded / policy.rejected, as the next job would
        if self.ctx.policies.policy.hash != before:
            said += f"; {_preview(self.ctx)}"
        try:
            new = self.load()
        except ConfigError as exc:
            return f"{said}; {_refused(exc)}"
        restart = changed(self.settings, new)
        self.settings = new
        return said + _restart_note(restart)


def _preview(ctx: WorkerContext) -> str:
    """How many running runs the new policy would stop now (workers/preview.py); a failure to read costs the
    preview, never the reload."""
    from trainwarden.workers import preview

    try:
        return preview.said(*preview.would_stop(ctx.store, ctx.policies.policy))
    except TrainwardenError as exc:
        return f"no backtest of it over the running runs: {exc}"


@dataclass(slots=True)
class BotReload:
    load: Callable[[], Settings]
    settings: Settings
    notifier: Notifier
    holders: Sequence[HasConfig] = ()
    slack: bool = False  # posting to Slack (the console has no channels)

    def __call__(self) -> str:
        from trainwarden.bot.reconfigure import apply, differences

        try:
            new = self.load()
        except ConfigError as exc:
            return _refused(exc)
        live, later = differences(self.settings.slack, new.slack)
        apply(new.slack, notifier=self.notifier, holders=self.holders, slack=self.slack)
        restart = [*changed(self.settings, new, live=("slack",)), *later]
        self.settings = new
        return f"reloaded its settings: {', '.join(live) or 'nothing changed'}{_restart_note(restart)}"
