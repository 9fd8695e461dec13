"""`trainwarden launch`: a run on this host in tmux (`launch RUN [OPTIONS] -- COMMAND...`), or an experiment
on its server over SSH (`launch EXP`).

The training command is exactly what follows the first `--`: `cli.main` splits the command line there
before argparse sees it, so options are accepted anywhere before it and none is taken for the command.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from trainwarden import wiring
from trainwarden.agent.health import log_tail
from trainwarden.cli import remote as cli_remote
from trainwarden.cli.parser import unrecognized
from trainwarden.core.errors import UsageError
from trainwarden.core.signals import sigint_deferred
from trainwarden.events import types as t
from trainwarden.events.backend import EventLog
from trainwarden.events.envelope import Event
from trainwarden.events.errors import StoreError
from trainwarden.events.heartbeat import read_beats
from trainwarden.events.payloads import RunLaunchedData
from trainwarden.events.store import EventStore
from trainwarden.extras import require
from trainwarden.ops.launch_messages import failed_at_launch, holding, interrupted
from trainwarden.ops.stop import stop_asked
from trainwarden.remote.first_seconds import TAIL_LINES, WINDOW_S, EarlyExit
from trainwarden.settings import Settings


def register(sub: Any) -> None:
    s = sub.add_parser(
        "launch",
        usage="%(prog)s RUN [OPTIONS] [-- COMMAND ...]",
        help="start a run: `launch EXP` (an experiment from experiments_dir, on its server over SSH) or "
        "`launch RUN [OPTIONS] -- COMMAND...` (on this host)",
        extras_allowed=True,  # words before `--` that no option takes: cmd_launch says what to do with them
    )
    s.add_argument("run", help="experiment name (remote) or run name (with -- COMMAND, local)")
    cli_remote.launch_args(s)
    s.add_argument("--workdir", default=".", help="directory to run in (default: here)")
    s.add_argument("--log", help="log file (default: WORKDIR/RUN.log)")
    s.add_argument("--tmux-socket", help="tmux socket name (tmux -L)")
    s.add_argument("--stop-command", help="command that stops the run cleanly (split on spaces, no shell)")
    s.add_argument("--no-wandb", action="store_true", help="the run does not use W&B: no W&B rule applies to it")
    s.add_argument("--check-s", type=float, default=WINDOW_S, metavar="SECONDS",
                   help=f"wait this long for a command that fails at once; it is then reported with its "
                   f"exit status and the log's last lines, exit 1 (default {WINDOW_S:g}; 0: do not wait)")  # fmt: skip
    s.add_argument("stray", nargs="*", metavar="-- COMMAND", help="the training command and its arguments, after --")
    s.set_defaults(func=cmd_launch, known_options=tuple(s._option_string_actions))  # for "did you mean"


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(the options, the training command) of `launch ... -- COMMAND`: split at the first `--`.
    None for every other command line, whose `--` argparse handles as usual."""
    if "--" not in argv or subcommand(argv) != "launch":
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


GLOBAL_WITH_VALUE = ("--config", "--redis-url", "--log-level")


def stray_problem(args: argparse.Namespace) -> str | None:
    """Pure: the usage error for words before `--` that no option of launch takes (a command without `--`, or
    a misspelt option, named with the one meant); None when there are none. `cli.main` exits 2 with it, as
    argparse does for every other command's unrecognized arguments."""
    if not args.stray:
        return None
    options = any(w.startswith("-") for w in args.stray)
    unknown = f"{unrecognized(args.stray, args.known_options)}; " if options else ""
    return (f"{unknown}give the training command after --, options before it: "
            f"trainwarden launch {args.run} [OPTIONS] -- COMMAND...")  # fmt: skip


def subcommand(argv: list[str]) -> str | None:
    """The first word that is neither an option nor a global option's value."""
    words = iter(argv)
    for word in words:
        if word == "--":
            return None
        if word in GLOBAL_WITH_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def cmd_launch(args: argparse.Namespace, settings: Settings) -> int:
    from trainwarden.remote.local_launch import LaunchSpec, early_exit, launch_local
    from trainwarden.remote.wrapper import EXIT_SUFFIX

    command: list[str] = args.training_command
    if not command:
        if settings.servers_file is None:
            raise UsageError(
                f"give the training command after --: trainwarden launch {args.run} [OPTIONS] -- python train.py "
                "(`launch EXP` alone launches an experiment on its server: set servers_file in the settings)"
            )
        require("launch", "asyncssh")
        return launch_remote(args, settings)
    workdir = Path(args.workdir).resolve()
    spec = LaunchSpec(
        run=args.run,
        command=tuple(command),
        workdir=workdir,
        log_path=Path(args.log).resolve() if args.log else workdir / f"{args.run}.log",
        tmux_socket=args.tmux_socket,
        stop_command=tuple(args.stop_command.split()) if args.stop_command else None,
        wandb=False if args.no_wandb else None,
    )
    store = wiring.store(settings)
    event: Event | None = None

    def held() -> None:
        print(holding(args.run), file=sys.stderr, flush=True)

    try:
        with sigint_deferred(held):  # started and recorded, or neither: a Ctrl-C in between lands after both
            event = launch_local(spec, store=store, host=settings.host)
        code = early_exit(spec, within_s=max(0.0, args.check_s))
    except KeyboardInterrupt:
        return said_interrupted(args.run, started=event is not None, log=str(spec.log_path))
    launched = cast(RunLaunchedData, event.data)
    early = None
    if code is not None:
        exit_file = Path(f"{spec.log_path}{EXIT_SUFFIX}")
        after = exit_file.stat().st_mtime - event.ts if exit_file.exists() else None
        early = EarlyExit(code=code, after_s=after, tail=tuple(log_tail(spec.log_path, TAIL_LINES)))

    def going() -> None:
        print(f"launched {args.run} in tmux session {launched['session']}; log: {launched['log_path']}")
        then = f"`trainwarden check {args.run}` for its state, `trainwarden stop {args.run}` to stop it"
        if agent_running(store, settings.host):
            print(f"this host's agent follows it: {then}")
        else:  # launched before anything runs: the control stream keeps the run for the agent to come
            print(f"no agent runs on this host yet: `trainwarden up` starts it (with the dispatcher, worker and bot) "
                  f"and it follows {args.run} from the log's first line; then {then}")  # fmt: skip

    return first_seconds_said(args.run, early, event, store, log=launched["log_path"], going=going)


def launch_remote(args: argparse.Namespace, settings: Settings) -> int:
    """`launch EXP`: a plan that holds EXP back refuses it (unless --force); then its first seconds."""
    launcher = cli_remote.experiment_launcher(settings)
    since = time.time()
    try:
        event = launcher.launch(args.run, gpu_ids=cli_remote.gpus_arg(args.gpus), resume=args.resume,
                                preflight=not args.no_preflight, force=args.force, by=local_user())  # fmt: skip
    except KeyboardInterrupt:  # in the preflight or over SSH: the log says whether the launch got recorded
        recorded = launched_since(wiring.store(settings), args.run, since)
        log = remote_log(recorded) if recorded is not None else None
        return said_interrupted(args.run, started=recorded is not None, log=log)
    d = cast(RunLaunchedData, event.data)
    if forced := d.get("forced"):
        print(f"--force: launching outside plan {forced['plan']}, which holds it back: {forced['overrode']}")
    try:
        early = launcher.first_seconds(event, within_s=args.check_s) if args.check_s > 0 else None
    except KeyboardInterrupt:
        return said_interrupted(args.run, started=True, log=remote_log(event))

    def going() -> None:
        print(f"launched {args.run} on {d['server']} GPUs {d['gpus']} in tmux session {d['session']} (pid {d['pid']})")
        print(f"log: {remote_log(event)}")

    return first_seconds_said(args.run, early, event, wiring.store(settings), log=remote_log(event), going=going)


def said_interrupted(run: str, *, started: bool, log: str | None = None) -> int:
    """Ctrl-C during a launch: one line on whether the run is going, no traceback; 130 as after SIGINT."""
    print(f"trainwarden: {interrupted(run, started=started, log=log)}", file=sys.stderr)
    return 130


def agent_running(store: EventStore, host: str) -> bool:
    """Whether an agent of `host` beats (a launch before anything runs is followed once one starts: say how)."""
    try:
        beats = read_beats(store.redis, store.keys)  # type: ignore[arg-type]
    except StoreError:
        return True  # the launch is recorded; a note about the agent is not worth an error
    now = time.time()
    return any(b.role == "agent" and b.host == host and b.stopped_at is None and not b.silent(now) for b in beats)


def launched_since(store: EventLog, run: str, since: float) -> Event | None:
    """The launch of `run` recorded since `since`, if any (read after a Ctrl-C cut a remote launch short)."""
    found = [e for _, e in store.iter_run(run) if isinstance(e, Event) and e.type == t.RUN_LAUNCHED and e.ts >= since]
    return found[-1] if found else None


def remote_log(launched: Event) -> str:
    d = cast(RunLaunchedData, launched.data)
    return f"{d['server']}:{d['log_path']}"


def local_user() -> str:
    """Who forced a launch from this shell (recorded with it); getuser fails without $USER and a passwd entry."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def first_seconds_said(
    run: str, early: EarlyExit | None, event: Event, store: EventStore, *, log: str, going: Callable[[], None]
) -> int:
    """The outcome of a launch's first seconds, the same for local and remote launches."""
    if early is None:
        going()
        return 0
    if early.code == 0:
        print(f"{run} ran and finished at once (exit status 0); log: {log}")
        return 0
    if stopped := stop_asked(store, run, after=event.ts):  # a NaN at step 3: the watchdog, not a failure
        print(f"trainwarden: {run} started, and was stopped at once: {stopped}; "
              f"`trainwarden check {run}` says why", file=sys.stderr)  # fmt: skip
        return 1
    head, *tail = failed_at_launch(run, early, log)
    print(f"trainwarden: error: {head}", file=sys.stderr)
    for line in tail:
        print(line, file=sys.stderr)
    return 1
