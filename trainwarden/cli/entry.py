"""`trainwarden` command line: one subcommand per process or task.

`main` (the console script, re-exported by cli/__init__.py) and the parser's table of subcommands;
each command group's body is a module beside this one (archive, health, launch, policy, replay, run, runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import logging
import os
import sys
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainwarden import logsetup, metrics_server, probes, reload, schemas, up, wiring, writable
from trainwarden.agent.errors import AgentBusy
from trainwarden.agent.watch import RunWatch
from trainwarden.cli import archive as archive_commands
from trainwarden.cli import health as health_commands
from trainwarden.cli import launch as launch_commands
from trainwarden.cli import policy as policy_commands
from trainwarden.cli import remote as cli_remote
from trainwarden.cli import replay as replay_commands
from trainwarden.cli import run as run_commands
from trainwarden.cli import runs as runs_command
from trainwarden.cli.parser import Parser, unrecognized
from trainwarden.core.errors import ConfigError, TrainwardenError
from trainwarden.core.redact import redact_text
from trainwarden.core.signals import reload_on_sighup, stop_on_signals
from trainwarden.events import standby
from trainwarden.events.errors import StoreError
from trainwarden.events.heartbeat import Heartbeat, last_words
from trainwarden.events.lease import Holding, Lease
from trainwarden.events.redis_errors import AUTH_FAILURES
from trainwarden.events.store import EventStore
from trainwarden.extras import MissingExtra, require
from trainwarden.logsetup import library_level
from trainwarden.mcp_server import command as mcp_command
from trainwarden.remedies import remedy_for
from trainwarden.settings import Settings, load_settings
from trainwarden.tools import simulate

if TYPE_CHECKING:
    from trainwarden.bot.notifier import Notifier

log = logging.getLogger("trainwarden")


def _settings(args: argparse.Namespace) -> Settings:
    settings = load_settings(args.config)
    if args.redis_url:
        settings = dataclasses.replace(settings, redis_url=args.redis_url)
    return settings


def cmd_agent(args: argparse.Namespace, settings: Settings) -> int:
    given: list[RunWatch] = []  # the command line's, kept across a SIGHUP
    for spec in args.watch or []:
        run, sep, path = spec.partition("=")
        if not sep or not path:
            raise ConfigError(f"--watch expects RUN=PATH, got {spec!r}")
        try:
            given.append(RunWatch(run=run, log=Path(path).resolve()))
        except TrainwardenError as exc:
            raise ConfigError(f"--watch {spec!r}: {exc}") from None
    watches = [*settings.watches, *given]
    if unwritable := writable.problems(settings, writable.AGENT, state_file=args.state_file):
        raise ConfigError("; ".join(unwritable))  # it could keep neither its offsets nor a spool for outages
    wiring.check_redis(settings)
    stop = stop_on_signals()
    lease = wiring.agent_lease(settings)  # one agent per host (events/agent_lease.py): another one stands by
    if not standby.stand_by(lease, stop, role="agent", doing="watches the runs of " + settings.host,
                            busy=_agent_busy(settings.host) if args.burst else None,
                            unheld_in_outage=True):  # fmt: skip
        return 0
    try:
        return _run_agent(args, settings, watches, given, lease=lease, stop=stop)
    finally:
        _release(lease)


def _agent_busy(host: str) -> Callable[[Holding], AgentBusy]:
    def busy(holding: Holding) -> AgentBusy:
        return AgentBusy(f"another agent ({holding.holder}) watches the runs of {host}; --burst reads nothing "
                         "while it runs")  # fmt: skip

    return busy


def _release(lease: Lease) -> None:
    try:
        lease.release()  # a standby takes over at once
    except StoreError as exc:
        log.warning("could not release the agent lease (%s); a standby takes over when it lapses", exc)


def _run_agent(args: argparse.Namespace, settings: Settings, watches: list[RunWatch], given: list[RunWatch],
               *, lease: Lease, stop: threading.Event) -> int:  # fmt: skip
    agent = wiring.agent(settings, watches=tuple(watches), state_file=args.state_file, lease=lease)
    if agent.pulse is not None:
        _serve_metrics(args, "agent", agent.pulse.heartbeat, wiring.store(settings, agent.pulse.heartbeat.client))
    control = agent.control.key if agent.control is not None else "no control stream"
    watching = ", ".join(f"{w.run}={w.watch.log}" for w in agent.watchers.values()) or "nothing yet"
    log.info("agent on %s watching %s; new runs from %s", settings.host, watching, control)
    if agent.gpu_problem:
        log.warning("%s; the agent goes on without GPU samples", agent.gpu_problem)
    reload_on_sighup("agent", reload.AgentReload(lambda: _settings(args), settings, agent, tuple(given)))
    agent.run(burst=args.burst, stop=stop)
    if agent.pulse is not None:
        agent.pulse.heartbeat.stopped()  # the operator stopped it: a planned restart raises no alarm
    return 0


def cmd_dispatcher(args: argparse.Namespace, settings: Settings) -> int:
    require("dispatcher", "rq")
    wiring.check_redis(settings, rq=True)
    dispatcher = wiring.dispatcher(settings)
    if dispatcher.pulse is not None:
        from trainwarden.workers.lanes import lanes

        _serve_metrics(args, "dispatcher", dispatcher.pulse.heartbeat, dispatcher.store,
                       queue_length=lambda: sum(queue.count for queue in lanes(dispatcher.queue)))  # fmt: skip
    log.info("dispatcher reading the feed into queue %r", settings.queue)
    stop = stop_on_signals()
    reload_on_sighup("dispatcher", None)  # its settings are read once; nothing it holds can be reloaded
    dispatcher.run(burst=args.burst, stop=stop)
    if dispatcher.pulse is not None:
        dispatcher.pulse.heartbeat.stopped()
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    require("worker", "rq", "asyncssh", "matplotlib")  # jobs, stopping remote runs, evidence charts
    wiring.check_redis(settings, rq=True)
    from trainwarden.workers.actions import resume_key_missing
    from trainwarden.workers.chart import preload
    from trainwarden.workers.context import install
    from trainwarden.workers.lanes import lanes
    from trainwarden.workers.process import record_policy_events
    from trainwarden.workers.rq_worker import ForkingWorker, InProcessWorker

    for unwritable in writable.problems(settings, writable.WORKER):
        # not fatal: a STOP never waits on its evidence; each one records evidence.failed and says so in Slack
        log.error("%s; stops go on without it", unwritable)
    ctx = wiring.worker_context(settings)
    if ctx.launcher and (missing := resume_key_missing(ctx.launcher.fleet.experiments.values(), ctx.launcher.secrets)):
        log.warning("%s", missing)
    install(ctx)
    reload_on_sighup("worker", reload.WorkerReload(lambda: _settings(args), settings, ctx))  # RQ takes INT/TERM
    record_policy_events(ctx)  # announce the policy once here, not in every forked job
    preload()
    queues = lanes(wiring.queue(settings))  # the fast lane first: RQ takes its queues in order
    # Jobs run in this process by default: a forked work horse per job cost ~25 ms, more than the
    # evaluation of the 30 runs a busy job covers (docs/benchmarks.md, "Scale: load and saturation").
    worker_class = ForkingWorker if args.fork else InProcessWorker
    worker = worker_class(queues, connection=queues[0].connection)
    pulse = wiring.pulse(settings, "worker", ctx.store)

    def backlog() -> int:
        return sum(queue.count for queue in queues)

    pulse.backlog = backlog
    _serve_metrics(args, "worker", pulse.heartbeat, ctx.store, queue_length=backlog,
                   jobs=lambda: {"ok": worker.successful_job_count, "failed": worker.failed_job_count},
                   rules=lambda: [rule.id for rule in ctx.policies.policy.rules])  # fmt: skip
    beating = threading.Event()
    beater = pulse.run_in_thread(beating, measure=lambda: max(wiring.queue_wait(queue) for queue in queues))
    log.info("worker taking jobs from queues %s (%s)", ", ".join(repr(queue.name) for queue in queues),
             "forked" if args.fork else "in this process")  # fmt: skip
    try:
        worker.work(burst=args.burst, logging_level=library_level(args.log_level))  # RQ: per-job chatter
    finally:
        beating.set()
        beater.join(timeout=5)  # no beat of it lands after `stopped()`
    if not args.burst and not worker.stop_asked:  # RQ's loop gave up (it logged why): let the supervisor restart us
        log.error("the worker's job loop ended without a stop request; exiting with status 1")
        return 1
    pulse.heartbeat.stopped()
    return 0


def cmd_bot(args: argparse.Namespace, settings: Settings) -> int:
    from trainwarden.bot.sink import ConsoleSink

    if os.environ.get("SLACK_BOT_TOKEN"):
        require("bot", "slack_bolt", "slack_sdk")
        if settings.servers_file is not None and not args.burst:
            require("bot", "asyncssh")  # /launch on the configured servers
    stop = stop_on_signals()
    wiring.check_redis(settings)
    if os.environ.get("SLACK_BOT_TOKEN") and not args.burst:
        bot = wiring.slack_bot(settings, os.environ)
        _serve_notifier_metrics(args, bot.notifier)
        reload_on_sighup("bot", reload.BotReload(lambda: _settings(args), settings, bot.notifier, bot.holders,
                                                 slack=True))  # fmt: skip
        log.info("Slack bot posting to %s (%s mode)", settings.slack.channel,
                 "Socket" if os.environ.get("SLACK_APP_TOKEN") else "HTTP")  # fmt: skip
        return bot.run(stop=stop)  # non-zero when one of its loops died: the supervisor restarts it
    if os.environ.get("SLACK_BOT_TOKEN"):
        sink = wiring.slack_sink(settings, os.environ)  # --burst: post what is there, no endpoint
        notifier = wiring.notifier(settings, sink, channel=settings.slack.channel or "")
    else:
        log.info("no Slack token configured: notifications go to this console")
        notifier = wiring.notifier(settings, ConsoleSink())
    _serve_notifier_metrics(args, notifier)
    reload_on_sighup("bot", reload.BotReload(lambda: _settings(args), settings, notifier,
                                             slack=bool(os.environ.get("SLACK_BOT_TOKEN"))))  # fmt: skip
    notifier.run(burst=args.burst, stop=stop)
    notifier.stopped()  # stopped on purpose (or a --burst done): nobody needs to be told it is silent
    return 0


def _serve_metrics(args: argparse.Namespace, command: str, heartbeat: Heartbeat, store: EventStore,
                   **extra: Any) -> None:  # fmt: skip
    """The Prometheus endpoint, when `--metrics-port` asks for one."""
    if args.metrics_port is None:
        return
    sources = metrics_server.Sources(client=store.redis, keys=store.keys, heartbeat=heartbeat,
                                     max_lag_s=args.ready_max_lag, **extra)  # fmt: skip
    metrics_server.serve(command, sources, port=args.metrics_port, host=args.metrics_host)


def _serve_notifier_metrics(args: argparse.Namespace, notifier: Notifier) -> None:
    if notifier.pulse is not None:
        _serve_metrics(args, "bot", notifier.pulse.heartbeat, notifier.store)


def cmd_dead_letters(args: argparse.Namespace, settings: Settings) -> int:
    letters = wiring.store(settings).dead_letters(count=args.count)
    if not letters:
        print("no dead letters")
    for d in letters:
        print(f"{d.id}  from {d.source} entry {d.sid}: {d.reason}\n    raw: {d.raw[:300]}")
    return 0


def cmd_simulate(args: argparse.Namespace, settings: Settings) -> int:
    return simulate.main_args(args, redis_url=settings.redis_url, namespace=settings.namespace,
                              stop=stop_on_signals())  # fmt: skip


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    require("demo", "rq", "asyncssh", "matplotlib")  # it starts a dispatcher and a worker
    from trainwarden.tools.demo import run_demo

    return run_demo(nan_at=args.nan_at, keep=args.keep)


DAEMONS = frozenset({"agent", "dispatcher", "worker", "bot"})  # they answer SIGHUP (trainwarden/reload.py)


def global_options(p: argparse.ArgumentParser, *, sub: bool = False) -> None:
    """The options every command takes, before or after its name. A subcommand's copies default to
    SUPPRESS, so an option given before the subcommand is not overwritten by the copy's default."""
    g = p.add_argument_group("global options") if sub else p
    dflt: dict[str, Any] = {"default": argparse.SUPPRESS} if sub else {}
    if not sub:
        p.add_argument("--version", action="version", version=f"%(prog)s {importlib.metadata.version('trainwarden')}")
    g.add_argument("--config", type=Path, help="settings YAML (default: $TRAINWARDEN_CONFIG)", **dflt)
    g.add_argument("--redis-url", help="event-log Redis (default: $REDIS_URL or the settings file)", **dflt)
    g.add_argument("--log-level", type=logsetup.log_level, choices=logsetup.LOG_LEVELS, metavar="LEVEL",
                   help=f"DEBUG, INFO, WARNING or ERROR, any case (default ${logsetup.LEVEL_ENV} or INFO; RQ's "
                   "per-job lines and asyncssh's only at DEBUG)",
                   **(dflt or {"default": logsetup.default_level()}))  # fmt: skip
    g.add_argument("--log-format", type=logsetup.log_format, choices=logsetup.LOG_FORMATS, metavar="FORMAT",
                   help=f"text, or json: one JSON object per line (default ${logsetup.FORMAT_ENV} or text)",
                   **(dflt or {"default": logsetup.default_format()}))  # fmt: skip


def _global_options_everywhere(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # an alias names the same parser
                child.allow_abbrev = False  # a command's own `--log` is not an abbreviation of --log-level|format
                global_options(child, sub=True)
                _global_options_everywhere(child)


def metrics_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-port", type=int, metavar="PORT", help="serve /metrics (Prometheus), /healthz and "
                   "/readyz on this port (off by default; needs the `metrics` extra)")  # fmt: skip
    p.add_argument("--metrics-host", default=metrics_server.HOST, metavar="ADDR",
                   help=f"address the metrics endpoint binds (default {metrics_server.HOST})")  # fmt: skip
    p.add_argument("--ready-max-lag", type=float, default=probes.READY_MAX_LAG_S, metavar="SECONDS",
                   help="/readyz answers 503 while this daemon's lag is over this (default %(default)gs)")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    # Every subparser is a Parser too (argparse makes them of their parent's class): suggestions and examples
    # The description is what the tool does (cli/help.py's entry ""), not this module's docstring
    p: argparse.ArgumentParser = Parser(
        prog="trainwarden", extras_allowed=True, allow_abbrev=False
    )  # see _main; `policy backtest --log`: not --log-level|format
    global_options(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("agent", help="watch this host's runs (logs, W&B, processes, GPUs) and publish events")
    s.add_argument("--watch", action="append", metavar="RUN=PATH", help="a run and its log file (repeatable); "
                   "launched runs are added through the host's control stream")  # fmt: skip
    s.add_argument("--state-file", type=Path, help="where read offsets and registered runs are kept")
    s.add_argument("--burst", action="store_true", help="publish what is there, then exit")
    metrics_options(s)
    s.set_defaults(func=cmd_agent)

    s = sub.add_parser("dispatcher", help="turn new events into per-run RQ jobs")
    s.add_argument("--burst", action="store_true", help="dispatch what is there, then exit")
    metrics_options(s)
    s.set_defaults(func=cmd_dispatcher)

    s = sub.add_parser("worker", help="run RQ jobs: evaluate policies, build evidence, stop runs")
    s.add_argument("--burst", action="store_true", help="run queued jobs, then exit")
    s.add_argument("--fork", action="store_true", help="run each job in a forked work horse (RQ's default "
                   "Worker: isolation, at ~25 ms a job) instead of in this process")  # fmt: skip
    s.add_argument("--simple", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for old scripts
    metrics_options(s)
    s.set_defaults(func=cmd_worker)

    s = sub.add_parser("bot", help="post anomalies and decisions (console without a Slack token)")
    s.add_argument("--burst", action="store_true", help="post what is there, then exit")
    metrics_options(s)
    s.set_defaults(func=cmd_bot)

    launch_commands.register(sub)

    for commands in (run_commands, replay_commands, archive_commands, policy_commands, schemas, health_commands, up):
        commands.register(sub)

    runs_command.register(sub)

    s = sub.add_parser("dead-letters", help="show entries that could not be decoded")
    s.add_argument("--count", type=int, default=20)
    s.set_defaults(func=cmd_dead_letters)

    cli_remote.register(sub)
    mcp_command.register(sub)

    s = sub.add_parser("simulate", help="synthetic runs publishing metric events at a fixed rate (load tests)")
    simulate.add_arguments(s)
    s.set_defaults(func=cmd_simulate)

    s = sub.add_parser("demo", help="run the whole NaN -> STOP path on this machine, self-contained")
    s.add_argument("--nan-at", type=int, default=25, help="step at which the synthetic loss turns NaN")
    s.add_argument("--keep", action="store_true", help="keep the demo's directory (logs, evidence, Redis data)")
    s.set_defaults(func=cmd_demo)
    _global_options_everywhere(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _main(sys.argv[1:] if argv is None else list(argv))
        finally:
            sys.stdout.flush()  # a reader that went away (`| head`) shows here, inside this handler
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit would fail too
        return 128 + 13  # as a shell reports a command SIGPIPE ended, without the traceback


def _main(argv: list[str]) -> int:
    options, training_command = launch_commands.split_command(argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(options)
    if unknown and args.func is not launch_commands.cmd_launch:
        parser.error(unrecognized(unknown, parser._option_string_actions))
    if args.func is launch_commands.cmd_launch:
        args.stray = [*args.stray, *unknown]  # words before `--` (argparse leaves some unmatched)
        if (problem := launch_commands.stray_problem(args)) is not None:
            _command_parser(parser, args.command).error(problem)  # launch's usage, exit 2
        args.training_command = training_command or []
    logsetup.configure(level=args.log_level, fmt=args.log_format, daemon=args.command)
    if args.command in DAEMONS:  # until the daemon installs its reload: SIGHUP's default would end it
        reload_on_sighup(args.command, lambda: "is still starting: nothing reloaded (send it again once it runs)")
    settings: Settings | None = None
    try:
        settings = _settings(args)
        code = int(args.func(args, settings))
    except AUTH_FAILURES as exc:  # ours, or a library's that spoke to Redis itself (RQ)
        print(line := auth_failed(exc, settings), file=sys.stderr)  # one line: which Redis, what it said, what to do
        last_words(line)
        return 1
    except MissingExtra as exc:
        print(exc, file=sys.stderr)  # the whole story in one line: what to install
        return 1
    except TrainwardenError as exc:
        print(f"trainwarden: error: {exc}", file=sys.stderr)
        if remedy := remedy_for(exc, start_here=first_start(args, settings)):
            print(f"trainwarden: {remedy}", file=sys.stderr)
        last_words(f"exited: {exc}")
        return 1
    except Exception as exc:  # a daemon's own fault: its heartbeat names it before the traceback ends the process
        last_words(f"exited: {type(exc).__name__}: {exc}")
        raise
    if code != 0:
        last_words()  # what ended it was logged (the bot's dead loop, RQ's loop): the heartbeat has it
    return code


def _command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The subcommand's own parser (its usage and prog in an error)."""
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def auth_failed(exc: Exception, settings: Settings | None) -> str:
    """One line for credentials Redis refused: the URL(s) with the password masked, and the fix."""
    urls = [u for u in ([] if settings is None else [settings.redis_url, settings.rq_redis_url]) if u]
    where = " or ".join(dict.fromkeys(redact_text(u) for u in urls)) or "Redis"
    reply = (str(exc.__cause__ or exc).splitlines() or [type(exc).__name__])[0]
    for url in urls:  # Redis' reply never holds the password; masked anyway, without rewording the reply
        password = urllib.parse.urlsplit(url).password
        reply = reply.replace(password, "***") if password else reply
    return (
        f"trainwarden: error: Redis at {where} refused the credentials ({reply}); put the right password in the "
        "URL (redis://:PASSWORD@host:port/0, or redis://USER:PASSWORD@... for an ACL user) via REDIS_URL or --redis-url"
    )


def first_start(args: argparse.Namespace, settings: Settings | None) -> bool:
    """Whether a Redis that does not answer may just not be started yet: a command run by hand (`launch`,
    `health`: not a daemon, which a supervisor starts) with a Redis URL on this machine, which `up --redis` serves."""
    return args.command not in DAEMONS and settings is not None and up.local_redis(settings.redis_url) is not None


if __name__ == "__main__":
    sys.exit(main())
