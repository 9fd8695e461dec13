"""The replay operation: a run's timeline and its state folded from the log alone (as of a time), and the
policies that made its recorded decisions (for `replay --verify`). The CLI prints the lines; the MCP server
returns them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from trainwarden.archive.history import History, load_history
from trainwarden.core.errors import PolicyNotRecorded
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.errors import StoreUnavailable
from trainwarden.events.payloads import PolicyLoadedData
from trainwarden.events.projection import fold
from trainwarden.events.store import EventStore, Malformed
from trainwarden.ops import render
from trainwarden.ops.times import parse_time
from trainwarden.policies.default import default_policy
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy
from trainwarden.policies.model import Policy
from trainwarden.workers.policy_source import read_policy_file

TIME_OPTIONS = {"since": "--since", "until": "--until", "as_of": "--as-of"}  # how an error names each time


def _selected(item: Event | Malformed, types: list[str] | None, since: float | None, until: float | None) -> bool:
    if isinstance(item, Malformed):
        return types is None and since is None and until is None
    if types is not None and not any(item.type == x or item.type.startswith(x + ".") for x in types):
        return False
    return (since is None or item.ts >= since) and (until is None or item.ts <= until)


def replay_lines(history: History, *, types: list[str] | None = None, since: str | None = None,
                 until: str | None = None, as_of: str | None = None, as_json: bool = False,
                 names: Mapping[str, str] = TIME_OPTIONS) -> list[str]:  # fmt: skip
    """The timeline (filtered) and the state folded from the log (as of a time); `as_json`: the state alone.
    Times in any form `parse_time` reads; `names` says each time's parameter in an error (the CLI's options)."""
    run, entries = history.run, history.entries
    now = time.time()
    since_ts = parse_time(since, now=now, option=names["since"]) if since else None
    until_ts = parse_time(until, now=now, option=names["until"]) if until else None
    as_of_ts = parse_time(as_of, now=now, option=names["as_of"]) if as_of else None
    if as_of_ts is not None:
        until_ts = as_of_ts if until_ts is None else min(until_ts, as_of_ts)
    state = fold(e for _, e in entries if isinstance(e, Event) and (as_of_ts is None or e.ts <= as_of_ts))
    if as_json:
        return [json.dumps(state.to_dict(), default=str, indent=2)]
    shown = [(sid, item) for sid, item in entries if _selected(item, types, since_ts, until_ts)]
    archived = f"; {history.archived} from {len(history.files)} archive file(s)" if history.files else ""
    lines = [f"Timeline of {run} ({len(shown)} of {len(entries)} entries{archived})"]
    lines += ["  " + render.timeline_line(sid, item) for sid, item in shown]
    lines.append(f"State as of {render.fmt_ts(as_of_ts)} (folded from the log alone)" if as_of_ts is not None
                 else "Final state (folded from the log alone)")  # fmt: skip
    lines += ["  " + line for line in render.state_lines(state)]
    return lines


class RecordedPolicies:
    """Policies by content hash, from the `trainwarden.system` run's `policy.loaded` events (their text), the
    default policy, and a file given on the command line."""

    def __init__(self, store: EventStore, *, extra: Path | None = None) -> None:
        self.texts: dict[str, tuple[str, str | None]] = {}  # hash -> its text, and its base's (`extends`)
        try:
            system = load_history(store, t.SYSTEM_RUN, required=False).entries  # archived too
        except StoreUnavailable:
            system = []  # replaying archive files offline: the default policy and --policy only
        for _, item in system:
            if not isinstance(item, Event) or item.type != t.POLICY_LOADED:
                continue
            loaded = cast(PolicyLoadedData, item.data)
            if text := loaded.get("text"):
                self.texts[loaded["policy"]] = text, loaded.get("base")
        self.known: dict[str, Policy] = {default_policy().hash: default_policy()}
        if extra is not None:
            policy = read_policy_file(extra)
            self.known[policy.hash] = policy

    def get(self, digest: str) -> Policy:
        if digest not in self.known:
            text, base = self.texts.get(digest, (None, None))
            if text is None:
                raise PolicyNotRecorded(
                    f"policy {digest} made decisions in this run but its text is not in the log (no policy.loaded "
                    f"for it in run '{t.SYSTEM_RUN}'); pass the policy file with --policy FILE"
                )
            try:
                self.known[digest] = load_policy(text, source=f"policy {digest} (recorded)", base_text=base)
            except PolicyError as exc:
                raise PolicyNotRecorded(
                    f"the recorded text of policy {digest} does not load (pass the policy file with --policy FILE): "
                    f"{exc}"
                ) from exc
        return self.known[digest]
