"""`trainwarden health`: every daemon's last heartbeat in one table; exit 0 only when all are alive.

Expected parts are those seen within the heartbeat retention (a week: the hash expires then, or
`--forget COMPONENT` drops a retired one at once); a part is SILENT when its last beat is older than
three of its own intervals (events/heartbeat.py), STOPPED when it was stopped on purpose (no alarm
is raised for it; health still exits 1, since it watches nothing). `--here` judges only this host's
components, after this host's view of Redis (cli/health_here.py): a GPU server's check of its agent, and a
container's health check (deploy/docker-compose.yml), where one daemon runs per host name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from trainwarden import wiring
from trainwarden.cli.health_here import FAIL, host_checks
from trainwarden.core.words import shorten
from trainwarden.events import reading
from trainwarden.events.access import may
from trainwarden.events.heartbeat import SILENT_INTERVALS, Beat, forget, read_beats, write_refusal
from trainwarden.policies.durations import fmt_duration
from trainwarden.settings import Settings

OK = "OK"
SILENT = "SILENT"
STOPPED = "STOPPED"  # stopped on purpose (SIGTERM, Ctrl-C): not silent, no alarm, but not watching either
COLUMNS = ("COMPONENT", "PID", "AGE", "VERSION", "LAG", "LAST ERROR", "STATUS")
ERROR_WIDTH = 60


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("health", help="every daemon's heartbeat in one table; exit 1 when a part is silent")
    s.add_argument("--json", action="store_true", help="one JSON object per component, in a list")
    s.add_argument("--forget", metavar="COMPONENT", help="stop expecting a component (role@host) that is gone")
    s.add_argument("--here", action="store_true", help="this host's view: Redis reached with its URL (TLS, "
                   "credentials), its ACL user allowed the agent's commands, the data directory writable, NVML; "
                   "then only this host's daemons (the host setting, TRAINWARDEN_HOST, else the hostname)")  # fmt: skip
    s.set_defaults(func=cmd_health)


def row(beat: Beat, now: float) -> dict[str, Any]:
    """Pure: one component's line, as data (the JSON output and the table)."""
    return {
        "component": beat.component,
        "role": beat.role,
        "host": beat.host,
        "pid": beat.pid,
        "version": beat.version,
        "age_s": round(beat.age(now), 3),
        "interval_s": beat.interval_s,
        "lag_s": beat.lag_s,
        "lag_of": beat.lag_of,
        "backlog": beat.backlog,
        "last_error": beat.last_error,
        "last_error_at": beat.last_error_at,
        "notice": beat.notice,
        "status": STOPPED if beat.stopped_at is not None else SILENT if beat.silent(now) else OK,
    }


def table(rows: list[dict[str, Any]], now: float) -> str:
    def lag(r: dict[str, Any]) -> str:
        if r["lag_s"] is None:
            return "-"
        return f"{r['lag_of'] or 'lag'} {fmt_duration(r['lag_s'])}" + (
            f" ({r['backlog']})" if r["backlog"] is not None else ""
        )

    def error(r: dict[str, Any]) -> str:
        if not r["last_error"]:
            return "-"
        text = f"{fmt_duration(now - r['last_error_at'])} ago: {r['last_error']}" if r["last_error_at"] else r[
            "last_error"]  # fmt: skip
        return shorten(text, ERROR_WIDTH)

    cells = [COLUMNS] + [
        (r["component"], str(r["pid"]), fmt_duration(r["age_s"]), r["version"], lag(r), error(r), r["status"])
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells)


def notice_text(notice: str) -> str:
    """A daemon's notice (one line per matter) as said to an operator: for runs whose metrics the agent cannot
    read, the fixes too."""
    return "\n".join(
        f"{line}\n  ({reading.notice_advice(line)})"
        if line.startswith(reading.NOTICE) else line
        for line in notice.splitlines()
    )  # fmt: skip


def cmd_health(args: argparse.Namespace, settings: Settings) -> int:
    store = wiring.store(settings)
    if args.forget:
        gone = forget(store.redis, store.keys, args.forget)  # type: ignore[arg-type]
        print(f"{args.forget}: {'forgotten' if gone else 'not known'}")
        return 0
    checked = True
    if args.here:
        checks, client = host_checks(settings)
        for check in checks:
            print(check.line(), file=sys.stderr if args.json else sys.stdout)
        checked = all(c.status != FAIL for c in checks)
        if client is None:
            return 1  # Redis not reached: no heartbeat to read
        client.close()
    now = time.time()
    # an agent's ACL user may not write the probe key (its rights were checked above): asked first, not refused
    probe = not args.here or may(store.redis, "set", store.keys.probe(), "x")
    refused = write_refusal(store.redis, store.keys) if probe else None
    beats = read_beats(store.redis, store.keys, host=settings.host if args.here else None)  # type: ignore[arg-type]
    rows = [row(b, now) for b in beats]
    healthy = checked and bool(rows) and all(r["status"] == OK for r in rows) and refused is None
    if refused:  # first: it is why every daemon's heartbeat stalls (they are writes) and why events wait
        print(f"{refused}; the daemons wait (the agents spool) and catch up once it takes writes again",
              file=sys.stderr if args.json else sys.stdout)  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no daemon on {settings.host} has sent a heartbeat (start one there: on a GPU server `systemctl "
              "start trainwarden-agent`; `journalctl -u trainwarden-agent` says why it stopped)" if args.here else
              "no daemon has sent a heartbeat: nothing watches runs yet. `trainwarden up` starts the agent, "
              "dispatcher, worker and bot on this machine (`trainwarden up --redis` with a Redis of its "
              "own)")  # fmt: skip
    else:
        print(table(rows, now))
        silent = [r["component"] for r in rows if r["status"] == SILENT]
        if silent:
            print(f"\nsilent (no heartbeat for {SILENT_INTERVALS} of their intervals): {', '.join(silent)}")
        for r in rows:
            if r["notice"]:
                print(f"\n{r['component']}: {notice_text(r['notice'])}")
    if not args.json:
        print(
            f"\ndata directory here: {settings.data_dir} (evidence {settings.evidence_dir}, findings "
            f"{settings.findings_file}, agent state {settings.agent_state_file})"
        )
    return 0 if healthy else 1
