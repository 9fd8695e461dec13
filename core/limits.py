"""How large what reaches an event may be: one definition for the producers and for reading.

A name longer than a person could read (a 100,000-character metric name once grew an evidence report
to 2.2 MB) is refused where events are made (the agent leaves that value out and says so once) and
where they are read (the codec dead-letters an entry holding one, or one over the size cap), so a
forged entry cannot carry it into a run state, a pack or a message either.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_NAME_CHARS = 200  # a metric name, a rule (run names have their own rule: events/envelope.py)
MAX_HOST_CHARS = 255  # a host name (DNS allows 253)
MAX_ID_CHARS = 400  # an event id: its producer (at most 200 characters) with the run and the seq
# payload fields that name something, and their caps; text fields (a reason, a log line) have the entry's
NAME_FIELDS = {"metric": MAX_NAME_CHARS, "rule": MAX_NAME_CHARS, "host": MAX_HOST_CHARS, "run_host": MAX_HOST_CHARS}
MAX_ENTRY_CHARS = 1 << 20  # a stored entry's JSON text, every type but policy.loaded
# policy.loaded carries a policy file's text: the YAML reader takes up to 1,000,000 characters, which JSON
# may escape to six characters each (\uXXXX)
MAX_POLICY_ENTRY_CHARS = 6 * 1_000_000 + MAX_ENTRY_CHARS


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a metric, or None."""
    if len(name) > MAX_NAME_CHARS:
        return f"metric name of {len(name)} characters (at most {MAX_NAME_CHARS}): {name[:40]!r}..."
    return None


def field_problem(key: str, value: object) -> str | None:
    """Why a payload's `key` cannot hold `value` for its length (NAME_FIELDS), or None."""
    cap = NAME_FIELDS.get(key)
    if cap is not None and isinstance(value, str) and len(value) > cap:
        return f"{key} of {len(value)} characters (at most {cap})"
    return None


def envelope_problem(event_id: str, event_type: str, host: str) -> str | None:
    """Why an envelope's names are too long to read, or None (each is a str already)."""
    if len(host) > MAX_HOST_CHARS:
        return f"host of {len(host)} characters (at most {MAX_HOST_CHARS})"
    if len(event_id) > MAX_ID_CHARS or len(event_type) > MAX_NAME_CHARS:
        return (f"id of {len(event_id)} or type of {len(event_type)} characters (at most {MAX_ID_CHARS} and "
                f"{MAX_NAME_CHARS})")  # fmt: skip
    return None


def names_fit(names: Iterable[str]) -> bool:
    """Every name within MAX_NAME_CHARS (the producers' fast path)."""
    return max(map(len, names), default=0) <= MAX_NAME_CHARS  # one C-speed pass: every metric event asks


def size_problem(chars: int, *, limit: int = MAX_ENTRY_CHARS) -> str | None:
    """Why an entry of `chars` characters is refused, or None."""
    if chars > limit:
        return f"entry of {chars} characters, over {limit} characters"
    return None
