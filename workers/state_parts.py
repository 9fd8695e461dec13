"""The policy state's stored form in parts: one MessagePack field a rule (`r:<rule id>`), one for the rest (`head`).

A mature run's policy state is ~15 KB (the rule windows), and `json.dumps` of it whole was a quarter of a worker's
CPU per metric event (docs/benchmarks.md, "Worker cost per event"). A turn changes a few of its ~40 rules: every
rule is encoded (msgspec's MessagePack: ~10x cheaper than json, `bench/state_codec.py`) and compared with the bytes
stored, and only the rules whose bytes differ are written, the rules that left the state deleted. What is
stored is known from the read (the fields as they came) or from the commit (kept with a cached checkpoint), so a
rule the engine changed is never left unwritten, whatever part of the engine changed it.

A checkpoint written whole (`policy`, JSON: before this form, or a state MessagePack cannot hold, such as an
integer past 64 bits) is read as it was, and the next write replaces it with the parts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import msgspec
from trainwarden.policies.state import PolicyState, RuleState

HEAD = "head"  # the policy state but its rules
WHOLE = "policy"  # the whole state as JSON: the form before the parts, and the fallback
RULE = "r:"  # prefix of a rule's field
_RULE_B, _HEAD_B, _WHOLE_B = RULE.encode(), HEAD.encode(), WHOLE.encode()
_HEAD_SLOTS = tuple(name for name in PolicyState.__slots__ if name != "rules")
_ENCODE = msgspec.msgpack.Encoder().encode
_DECODE = msgspec.msgpack.Decoder().decode


@dataclass(slots=True)
class PolicyWrite:
    """What a commit writes of the policy state: fields to set, fields to delete, and the stored parts after it."""

    fields: dict[str, bytes | str]
    drop: list[str]
    stored: dict[str, bytes] | None  # rule field -> bytes, as stored once committed; None: stored whole
    changed: int = 0  # rules written


def encode_rule(rs: RuleState) -> bytes:
    """One rule's state, its fields in order (a field added later at the end reads back with its default)."""
    return _ENCODE([rs.sig, rs.kind_state, rs.holding, rs.since, rs.samples, rs.opened_by, rs.escalated,
                    rs.resolved_at, rs.reason, rs.values, rs.since_step, rs.since_evals, rs.resolved_step,
                    rs.resolved_evals])  # fmt: skip


def decode_rule(data: bytes) -> RuleState:
    return RuleState(*_DECODE(data))


def encode_policy(state: PolicyState, stored: dict[str, bytes] | None) -> PolicyWrite:
    """The write that brings the stored form from `stored` (None: not in parts, or nothing stored) to `state`."""
    try:
        values = {name: getattr(state, name) for name in _HEAD_SLOTS}
        values["rules"] = list(state.rules)  # their order: a hash's is not kept
        head = _ENCODE(values)
        parts = {RULE + rule_id: encode_rule(rs) for rule_id, rs in state.rules.items()}
    except (OverflowError, TypeError, msgspec.EncodeError):  # not MessagePack's (an int past 64 bits): whole
        drop = [HEAD, *stored] if stored is not None else [HEAD]
        return PolicyWrite({WHOLE: json.dumps(state.to_dict())}, drop, None, len(state.rules))
    fields: dict[str, bytes | str] = {HEAD: head}
    if stored is None:
        fields.update(parts)
        return PolicyWrite(fields, [WHOLE], parts, len(parts))
    changed = 0
    for name, data in parts.items():
        if stored.get(name) != data:
            fields[name] = data
            changed += 1
    drop = [name for name in stored if name not in parts]
    return PolicyWrite(fields, drop, parts, changed)


def decode_policy(fields: dict[bytes, bytes], salvage: tuple[PolicyState, dict[str, bytes]] | None = None,
                  ) -> tuple[PolicyState, dict[str, bytes] | None]:  # fmt: skip
    """The policy state of a checkpoint's fields, and its stored parts (None: stored whole, or none stored).

    `salvage`: a state this process committed earlier and has not changed since, with its parts as committed
    (a worker's cached checkpoint that another worker has written after). A rule whose stored bytes are still
    those is taken from it as it is, not decoded: on a busy installation the next job of a run mostly goes to
    another worker, and decoding every rule was a third of such a turn. The salvaged state is consumed."""
    head = fields.get(_HEAD_B)
    if head is None:
        whole = fields.get(_WHOLE_B)
        return (PolicyState.from_dict(json.loads(whole)) if whole else PolicyState()), None
    values = _DECODE(head)
    state = PolicyState(**{k: v for k, v in values.items() if k in _HEAD_SLOTS})
    stored = {name.decode(): data for name, data in fields.items() if name.startswith(_RULE_B)}
    if salvage is None:
        state.rules = {rule_id: decode_rule(stored[RULE + rule_id]) for rule_id in values.get("rules", ())}
        return state, stored
    held, held_parts = salvage
    rules = {}
    for rule_id in values.get("rules", ()):
        data = stored[RULE + rule_id]
        kept = held.rules.get(rule_id)
        rules[rule_id] = kept if kept is not None and held_parts.get(RULE + rule_id) == data else decode_rule(data)
    state.rules = rules
    return state, stored
