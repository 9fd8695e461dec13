"""The workers' policy: the configured file, hot-reloaded, or the packaged default.

At each job start `refresh()` looks at the file (one stat; the text is read only when the size or
mtime moved, and parsed only when its content changed). A valid new file becomes the policy and
is announced with a `policy.loaded` event (its text and content hash) in the reserved `trainwarden.system`
run; an invalid one is announced with `policy.rejected` (every file:line:column problem) and the
old policy stays. Event ids derive from the content, so several workers announcing the same
change append it once.

With RQ's forking worker each job runs in a child process, so a change seen by a job is not
remembered by the parent: every later job re-reads the changed file (a few milliseconds) until
the worker restarts. The announcements are deduplicated by id either way.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.payloads import PolicyLoadedData, PolicyRejectedData
from trainwarden.policies.default import DEFAULT_SOURCE, default_policy
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.loader import load_policy
from trainwarden.policies.model import Policy

log = logging.getLogger(__name__)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def read_policy_file(path: Path) -> Policy:
    """Load a policy file; PolicyError (with file:line:column problems) when it is unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([f"{path}: cannot read the policy file: {exc}"], source=str(path)) from None
    return load_policy(text, source=str(path))


class PolicySource:
    def __init__(self, *, host: str, path: Path | None = None, policy: Policy | None = None) -> None:
        self.host = host
        self.path = path
        self._stat: tuple[int, int] | None = None
        if path is not None:
            self._stat = self._stat_of(path)
            self.policy = read_policy_file(path)  # an invalid file at startup is fatal: say so now
            self._sha = sha256(self.policy.text or "")
        else:
            self.policy = policy or default_policy()
            self._sha = sha256(self.policy.text or "")
        self._pending: list[Event] = [self._loaded(self.policy)]

    def refresh(self) -> list[Event]:
        """Pick up a changed file; returns the `trainwarden.system` events still to record (call `recorded()` after)."""
        if self.path is not None:
            stat = self._stat_of(self.path)
            if stat != self._stat:
                self._stat = stat
                self._reload(self.path)
        return list(self._pending)

    def recorded(self) -> None:
        self._pending.clear()

    def _reload(self, path: Path) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._reject([f"{path}: cannot read the policy file: {exc}"])
            return
        digest = sha256(text)
        if digest == self._sha:
            return
        try:
            policy = load_policy(text, source=str(path))
        except PolicyError as exc:
            self._reject(exc.problems)
            return
        self._sha = digest
        if policy.hash != self.policy.hash:
            log.warning("policy %s reloaded from %s: %d rules, hash %s", policy.name, path, len(policy.rules),
                        policy.hash)  # fmt: skip
            self.policy = policy
            self._pending.append(self._loaded(policy))

    def _reject(self, problems: list[str]) -> None:
        log.error("policy file %s rejected; keeping policy %s:\n  %s", self.path, self.policy.hash,
                  "\n  ".join(problems))  # fmt: skip
        key = sha256("\n".join(problems))[:16]
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
        return make_event(t.POLICY_LOADED, run=t.SYSTEM_RUN, host=self.host, producer=f"policy/{policy.hash}", seq=1,
                          data=data)  # fmt: skip

    @staticmethod
    def _stat_of(path: Path) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size
