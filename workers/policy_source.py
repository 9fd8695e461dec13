"""The workers' policy: the configured file, hot-reloaded, or the packaged default.

At each job start `refresh()` looks at the file (one stat; the text is read only when the size or
mtime moved, and parsed only when its content changed). A valid new file becomes the policy and
is announced with a `policy.loaded` event (its text and content hash) in the reserved `trainwarden.system`
run; an invalid one is announced with `policy.rejected` (every file:line:column problem) and the
old policy stays. Event ids derive from the content (a rejection's also from the policy it kept
and the file's mtime), so several workers announcing the same change append it once, while the
same invalid text saved again after a valid edit is announced again.

A worker that starts while the file is invalid starts with the last valid policy recorded in
Redis (the newest `policy.loaded` that carries its text) and announces the rejection; only when
no valid policy was ever recorded does it refuse to start (`NoValidPolicy`).

With RQ's forking worker each job runs in a child process, so a change seen by a job is not
remembered by the parent: every later job re-reads the changed file (a few milliseconds) until
the worker restarts. The announcements are deduplicated by id either way.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.history import newest_first
from trainwarden.events.payloads import PolicyLoadedData, PolicyRejectedData
from trainwarden.events.store import EventStore, decode_entries
from trainwarden.policies.default import DEFAULT_SOURCE, default_policy
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy
from trainwarden.policies.model import Policy
from trainwarden.workers.errors import NoValidPolicy

log = logging.getLogger(__name__)

RECORDED_PAGE = 500  # system-log entries read at a time, newest first, looking for the last policy.loaded


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def read_policy_file(path: Path) -> Policy:
    """Load a policy file; PolicyError (with file:line:column problems) when it is unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([f"{path}: cannot read the policy file: {exc}"], source=str(path)) from None
    return load_policy(text, source=str(path))


def last_recorded_policy(store: EventStore) -> Policy | None:
    """The newest valid policy recorded in the system log (a `policy.loaded` with its text), or None."""
    upper = "+"
    while True:
        entries = newest_first(store.redis, store.keys, t.SYSTEM_RUN, end=upper, count=RECORDED_PAGE,
                               what="read the recorded policies")  # fmt: skip
        for _sid, item in decode_entries(entries, t.SYSTEM_RUN):  # newest first
            if isinstance(item, Event) and item.type == t.POLICY_LOADED:
                policy = _recorded(cast(PolicyLoadedData, item.data))
                if policy is not None:
                    return policy
        if len(entries) < RECORDED_PAGE:
            return None
        upper = "(" + entries[-1][0].decode()


def _recorded(data: PolicyLoadedData) -> Policy | None:
    text = data.get("text")
    if not text or data.get("sha256") != sha256(text):
        return None  # built in code (no text), or not the text that was loaded
    try:
        return load_policy(text, source=f"{data.get('source')} (as recorded in Redis)", base_text=data.get("base"))
    except PolicyError:
        return None  # valid for an older trainwarden, not this one


class PolicySource:
    def __init__(
        self,
        *,
        host: str,
        path: Path | None = None,
        policy: Policy | None = None,
        recorded: Callable[[], Policy | None] | None = None,
    ) -> None:
        """`recorded` finds the last valid policy recorded (`last_recorded_policy`): used only when the file
        is invalid at start. Without it, or when it finds none, an invalid file raises NoValidPolicy."""
        self.host = host
        self.path = path
        self._stat: tuple[int, int] | None = None
        self._pending: list[Event] = []
        self._lock = threading.Lock()  # jobs refresh in the worker's thread, SIGHUP in its own (reload_now)
        if path is not None:
            self._stat = self._stat_of(path)
            try:
                self.policy = read_policy_file(path)
            except PolicyError as exc:
                self.policy = self._fall_back(path, exc, recorded)
                self._sha = ""
                self._pending.append(self._loaded(self.policy))
                self._reject(exc.problems)
                return
            self._sha = sha256(self.policy.text or "")
        else:
            self.policy = policy or default_policy()
            self._sha = sha256(self.policy.text or "")
        self._pending.append(self._loaded(self.policy))

    @staticmethod
    def _fall_back(path: Path, exc: PolicyError, recorded: Callable[[], Policy | None] | None) -> Policy:
        fallback = recorded() if recorded is not None else None
        if fallback is None:
            log.error("%s", exc)  # every problem, file:line:column
            first = " ".join(exc.problems[0].split())  # one line, whatever the YAML parser said
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            raise NoValidPolicy(
                f"the policy file {path} is invalid and no valid policy was ever recorded to start with instead: "
                f"{first}{more}; list every problem with `trainwarden policy check {path}`"
            ) from None
        log.error("policy file %s is invalid; starting with the last valid policy recorded, %s (%s)", path,
                  fallback.name, fallback.hash)  # fmt: skip
        return fallback

    def refresh(self) -> list[Event]:
        """Pick up a changed file; returns the `trainwarden.system` events still to record (call `recorded()` after)."""
        with self._lock:
            if self.path is not None:
                stat = self._stat_of(self.path)
                if stat != self._stat:
                    self._stat = stat
                    self._reload(self.path)
            return list(self._pending)

    def recorded(self, events: Sequence[Event] | None = None) -> None:
        """`events` (those `refresh` returned; None: all) are in the log: a reload since then keeps its own."""
        with self._lock:
            self._pending = [e for e in self._pending if events is not None and e not in events]

    def reload_now(self) -> str:
        """Read the file again now, whatever its stat says (SIGHUP): one line saying what changed."""
        with self._lock:
            if self.path is None:
                return f"no policy file configured; the packaged policy {self.policy.hash} stays"
            before = self.policy.hash
            self._stat = self._stat_of(self.path)
            self._sha = ""  # parse it even when its text is what was loaded
            problems = self._reload(self.path)
            if problems:
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                first = " ".join(problems[0].split())
                return f"refused the policy file, policy {before} stays: {first}{more}"
            if self.policy.hash != before:
                return (f"reloaded policy {self.policy.name} from {self.path}: {before} -> {self.policy.hash}, "
                        f"{len(self.policy.rules)} rules")  # fmt: skip
            return f"policy file {self.path} unchanged (policy {before})"

    def _reload(self, path: Path) -> list[str] | None:
        """Load `path` when its text changed; the problems when it is refused (the old policy stays)."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems = [f"{path}: cannot read the policy file: {exc}"]
            self._reject(problems)
            return problems
        digest = sha256(text)
        if digest == self._sha:
            return None
        try:
            policy = load_policy(text, source=str(path))
        except PolicyError as exc:
            self._reject(exc.problems)
            return exc.problems
        self._sha = digest
        if policy.hash != self.policy.hash:
            log.warning("policy %s reloaded from %s: %d rules, hash %s", policy.name, path, len(policy.rules),
                        policy.hash)  # fmt: skip
            self.policy = policy
            self._pending.append(self._loaded(policy))
        return None

    def _reject(self, problems: list[str]) -> None:
        log.error("policy file %s rejected; keeping policy %s:\n  %s", self.path, self.policy.hash,
                  "\n  ".join(problems))  # fmt: skip
        # what was kept and which save of the file: the same invalid text saved again later is announced again
        mtime = self._stat[0] if self._stat else 0
        key = sha256("\n".join([self.policy.hash, str(mtime), *problems]))[:16]
        data: PolicyRejectedData = {"source": str(self.path), "problems": problems, "kept": self.policy.hash}
        self._pending.append(
            make_event(t.POLICY_REJECTED, run=t.SYSTEM_RUN, host=self.host, producer=f"policy-rejected/{key}",
                       seq=1, data=data)
        )  # fmt: skip

    def _loaded(self, policy: Policy) -> Event:
        text = policy.text  # None for a policy built in code: replay --verify then needs --policy
        data: PolicyLoadedData = {
            "policy": policy.hash, "name": policy.name, "source": str(self.path or DEFAULT_SOURCE),
            "rules": len(policy.rules), "sha256": sha256(text) if text else None, "text": text,
        }  # fmt: skip
        if policy.base_text is not None:
            data["base"] = policy.base_text
        return make_event(t.POLICY_LOADED, run=t.SYSTEM_RUN, host=self.host, producer=f"policy/{policy.hash}", seq=1,
                          data=data)  # fmt: skip

    @staticmethod
    def _stat_of(path: Path) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size
