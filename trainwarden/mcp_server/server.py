"""The MCP server itself: each tool a thin call into reads.py or actions.py, built on the official `mcp` SDK.

Tools are plain functions (the SDK runs them in a worker thread, so a slow Redis read or an SSH launch never
stalls the protocol); a TrainwardenError becomes a tool error whose text is the message a user would get, so
the agent reads what went wrong and how to fix it. Nothing here writes to stdout: on stdio it is the protocol.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from trainwarden.core.errors import TrainwardenError, UnknownRun
from trainwarden.events.store import EventStore
from trainwarden.mcp_server import messages, reads
from trainwarden.mcp_server.actions import Actions, caller
from trainwarden.remedies import remedy_for
from trainwarden.remote.first_seconds import WINDOW_S
from trainwarden.settings import Settings

T = TypeVar("T")
NAME = "trainwarden"
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
STOPS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
LAUNCHES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def said(call: Callable[[], T]) -> T:
    """`call()`; a TrainwardenError as a tool error with the message a person would read (a crash stays one)."""
    try:
        return call()
    except UnknownRun as exc:
        raise ToolError(messages.unknown_run(exc.run)) from exc
    except TrainwardenError as exc:
        remedy = remedy_for(exc)  # Redis unreachable: is it running, which URL
        raise ToolError(f"{exc}; {remedy}" if remedy else str(exc)) from exc


def client_name(ctx: Context[Any, Any]) -> str | None:
    """The name the MCP client gave when it connected (clientInfo.name), if it gave one."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None else None


def build(settings: Settings, store: EventStore) -> MCPServer[Any]:
    """The server with its seven tools; `store` is the event log every tool reads and writes."""
    version = importlib.metadata.version("trainwarden")
    server: MCPServer[Any] = MCPServer(NAME, version=version, instructions=messages.INSTRUCTIONS)
    actions = Actions(store=store, settings=settings)

    @server.tool(annotations=READ)
    def check(run: str, interval: str | None = None) -> str:
        """The training-check report of a run now: data source (wandb_ok | log_fallback | unreachable), recent
        metrics, anomalies, evidence, decision (CONTINUE | WAIT | STOP), reason and next check; a stopped run's
        ends with its FINAL_SUMMARY. `interval` (like 30m, 1h) sets Next check (default: the settings', 30m)."""
        return said(lambda: reads.check(store, settings, run, interval=interval))

    @server.tool(annotations=READ)
    def status(run: str | None = None, everything: bool = False) -> str:
        """Active runs, one line each (most urgent first): status, progress, loss trend, GPU, data source, open
        anomalies, age of its last activity (training or lifecycle). `everything`: ended runs too. With `run`:
        that run with its last decisions and evidence pack."""
        return said(lambda: reads.status_text(store, run=run, everything=everything))

    @server.tool(annotations=READ)
    def runs() -> list[dict[str, Any]]:
        """Every run trainwarden knows, most recently active first: status, host, step, open anomalies, the
        last decision, and the time of its last activity (a heartbeat or a command about it is not one)."""
        return said(lambda: reads.runs(store))

    @server.tool(annotations=READ)
    def replay(run: str, *, as_of: str | None = None, since: str | None = None, until: str | None = None,
               types: list[str] | None = None, as_json: bool = False) -> str:  # fmt: skip
        """A run's timeline and its state folded from the event log alone. `as_of`: the state at that time
        (events after it ignored); `since`/`until` filter the timeline. Times: '30m ago' (or 30m), a clock time
        like 09:51, an ISO time like 2026-12-02T17:38, or unix seconds. `types`: only these event types
        ('anomaly' matches anomaly.opened and .resolved). `as_json`: the folded state as JSON."""
        return said(
            lambda: reads.replay(store, run, as_of=as_of, since=since, until=until, types=types, as_json=as_json)
        )

    @server.tool(annotations=READ)
    def policy_backtest(*, policy: str = "default", run: str | None = None, log: str | None = None,
                        wandb_dir: str | None = None, interval_s: float = 10.0, gpus: float = 1.0,
                        as_json: bool = False) -> str:  # fmt: skip
        """When a policy ('default' or a policy file's path) would have fired on one recorded history: a run in
        the event log (`run`), a training log file (`log`, its metric lines `interval_s` apart) or a W&B run
        directory (`wandb_dir`). Says the rules that fire, the decision timeline and the GPU-hours a STOP saves."""
        return said(lambda: reads.policy_backtest(settings, policy=policy, run=run, log=log, wandb_dir=wandb_dir,
                                                  interval_s=interval_s, gpus=gpus, as_json=as_json))  # fmt: skip

    @server.tool(annotations=STOPS)
    def stop(run: str, ctx: Context[Any, Any], reason: str | None = None, wait_s: float = 0.0) -> str:
        """Ask trainwarden's workers to stop a run (as `trainwarden stop` does), recorded with your identity and
        `reason`. Refused when the settings do not allow agents to stop runs (mcp.allow_actions), when the run
        has ended, or when nothing recorded says how to stop it. `wait_s` (at most 120): wait for the outcome."""
        who = caller(settings.mcp.identity, client_name(ctx))
        return said(lambda: actions.stop(who, run, reason=reason, wait_s=wait_s))

    @server.tool(annotations=LAUNCHES)
    def launch(experiment: str, ctx: Context[Any, Any], force: bool = False, check_s: float = WINDOW_S) -> str:
        """Launch an experiment of the configured experiments_dir on its server, as Slack's /launch does: a plan
        that holds it back refuses it (unless `force`), then the W&B guard and the preflight, then tmux over SSH.
        Refused unless the settings allow agents to launch (mcp.allow_actions). `check_s`: seconds to watch for
        a command that fails at once (0: do not wait)."""
        who = caller(settings.mcp.identity, client_name(ctx))
        return said(lambda: actions.launch(who, experiment, force=force, check_s=check_s))

    return server
