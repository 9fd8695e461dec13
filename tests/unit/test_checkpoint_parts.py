"""The policy state written in parts (workers/state_parts.py): only the rules that changed, MessagePack.

The property over the whole corpus (tests/data/real, read as the backtest reads it): a run evaluated with
partial checkpoint writes, its worker killed at random points (the state in memory dropped and read back from
the written hash, a turn's commit lost now and then) and resumed, gives the same decisions as one evaluated
whole in memory, and ends with the same state, field for field. The writes are the worker's own pure
encode/decode (`encode_checkpoint`, `decode_checkpoint`) applied to a hash as Redis applies HDEL + HSET."""

import json
import math
import random
import zlib
from collections.abc import Callable
from dataclasses import replace

import pytest
from trainwarden.events.codec import encode
from trainwarden.events.envelope import Event
from trainwarden.policies.default import default_policy
from trainwarden.policies.state import PolicyState, RuleState
from trainwarden.workers.checkpoint import Checkpoint, CheckpointWrite, decode_checkpoint, encode_checkpoint
from trainwarden.workers.evaluate import evaluate_entries
from trainwarden.workers.state_parts import HEAD, RULE, WHOLE

from tests.conftest import REPO
from trainwarden.cli.policy import MANIFEST, run_events
from trainwarden.tools.corpus import read_manifest

CORPUS = REPO / "tests" / "data" / "real"
INTERVAL = 10.0
POLICY = default_policy()
Write = Callable[[Checkpoint], CheckpointWrite]


def canonical(state: PolicyState) -> str:
    """The state field for field, as comparable text (a NaN equals a NaN; tuples and lists alike)."""
    return json.dumps(state.to_dict(), sort_keys=True, default=repr)


def whole_checkpoint(cp: Checkpoint) -> str:
    """Every field of the checkpoint, as comparable text."""
    rest = [cp.after, cp.emitted, cp.run.to_dict(), cp.pending, cp.guard, cp.dump]
    return canonical(cp.policy) + json.dumps(rest, sort_keys=True, default=repr)


def key(event: Event) -> tuple[str, str, bytes]:
    return event.id, event.type, encode(event)


def evaluate(events: list[Event], seed: int, *, write: Write | None) -> tuple[list, str]:
    """The worker's loop over a run's log, pages of random size, its outputs appended and read back.

    `write` None: one evaluation held in memory throughout. Else each page is committed with `write` to a
    hash, and at random points the worker dies: after its commit (the next page starts from the hash read
    back) or before it (the page's outputs and state are lost, and the page is evaluated again from the hash);
    or, after a commit, the next page goes to a second worker, which reads the hash and takes the rules still
    stored as it committed them from the checkpoint it held (`salvage`), and the first worker holds its own.
    The pages are the same either way (their own random stream)."""
    pages, kills = random.Random(seed), random.Random(seed + 1)
    log = [(f"{i}-0", e) for i, e in enumerate(events, 1)]
    stored: dict[bytes, bytes] = {}
    cp, outputs, position, size = Checkpoint(), [], 0, pages.randint(1, 16)
    other: Checkpoint | None = None  # the other worker's checkpoint as it committed it last (its cache)
    while position < len(log):
        page = log[position : position + size]
        step = evaluate_entries(POLICY, cp, page, run="backtest", host="w", now=0.0)
        if write is not None and kills.random() < 0.05:  # killed before the commit: nothing of this page written
            cp = decode_checkpoint(stored)
            continue
        if write is not None:
            stored = write(cp).applied(stored)
        position, size = position + len(page), pages.randint(1, 16)
        for e in step.outputs:
            log.append((f"{len(log) + 1}-0", e))
        outputs += [key(e) for e in step.outputs]
        if write is not None and kills.random() < 0.3:  # killed after the commit
            cp = decode_checkpoint(stored)
        elif write is not None and kills.random() < 0.3:  # the next page goes to the other worker, which salvages
            cp, other = decode_checkpoint(stored, salvage=other), cp  # the rules unchanged since its own commit
    if write is not None:
        cp = decode_checkpoint(stored)
    return outputs, whole_checkpoint(cp)


def corpus() -> list[tuple[str, list[Event]]]:
    runs = read_manifest(CORPUS / MANIFEST)
    return [(run.file, list(run_events(run.path, interval=run.interval or INTERVAL))) for run in runs]


@pytest.fixture(scope="module")
def runs() -> list[tuple[str, list[Event]]]:
    return corpus()


def diverging(runs: list[tuple[str, list[Event]]], write: Write, *, first: int | None = None) -> list[str]:
    """The runs whose decisions or final state differ between the two evaluations (seeded by the file name)."""
    out = []
    for name, events in runs[:first]:
        seed = zlib.crc32(name.encode())
        whole = evaluate(events, seed, write=None)
        resumed = evaluate(events, seed, write=write)
        if whole != resumed:
            out.append(name)
    return out


def test_a_run_killed_at_random_points_and_resumed_from_its_parts_decides_as_one_evaluated_whole(runs):
    assert len(runs) > 200
    assert diverging(runs, encode_checkpoint) == []


@pytest.mark.parametrize("left_out", [RULE, "run", "emitted"])
def test_the_property_catches_a_changed_field_left_unwritten(runs, left_out):
    """It can fail: a writer that leaves out one changed rule, or another changed field, of a partial write (the
    bug the parts could have)."""

    def skips_one(cp: Checkpoint) -> CheckpointWrite:
        partial = cp.stored is not None
        written = encode_checkpoint(cp)
        changed = sorted(name for name in written.fields if name.startswith(left_out))
        if partial:
            for name in changed[:1]:
                del written.fields[name]
        return written

    assert diverging(runs, skips_one)  # some runs differ (with a rule left out: most of them)


def mature() -> Checkpoint:
    cp = Checkpoint()
    events = next(events for name, events in corpus()[:1])
    evaluate_entries(POLICY, cp, [(f"{i}-0", e) for i, e in enumerate(events, 1)], run="backtest", host="w", now=0.0)
    cp.policy.rules["probe"] = RuleState(sig="s", kind_state={"window": [[1.0, math.nan], [2.0, 2**63 - 1]], "k": 1},
                                         since=3, since_step=7, values={"loss": math.inf})  # fmt: skip
    return cp


def test_a_checkpoint_reads_back_equal_field_for_field_and_writes_only_what_changed():
    cp = mature()
    stored = encode_checkpoint(cp).applied()
    assert WHOLE.encode() not in stored and HEAD.encode() in stored
    back = decode_checkpoint(stored)
    assert canonical(back.policy) == canonical(cp.policy)
    assert list(back.policy.rules) == list(cp.policy.rules)  # in their order
    assert type(back.policy.rules["probe"].since) is int  # not made a float
    assert (back.after, back.emitted, back.run, back.pending) == (cp.after, cp.emitted, cp.run, cp.pending)

    again = encode_checkpoint(back)  # nothing changed: the head (and the rest of the hash) only
    assert not [name for name in again.fields if name.startswith(RULE)] and again.drop == []
    back.policy.rules["probe"].samples += 1
    del back.policy.rules[next(iter(back.policy.rules))]
    first = next(iter(cp.policy.rules))
    written = encode_checkpoint(back)
    assert [n for n in written.fields if n.startswith(RULE)] == [RULE + "probe"] and written.drop == [RULE + first]
    assert canonical(decode_checkpoint(written.applied(stored)).policy) == canonical(back.policy)


def test_a_checkpoint_stored_whole_as_json_is_read_and_replaced_by_its_parts():
    """An upgrade loses nothing: the worker before this form wrote the state whole, as JSON, in `policy`."""
    cp = mature()
    old = encode_checkpoint(replace(cp, stored=None)).applied()
    for name in [n for n in old if n == HEAD.encode() or n.startswith(RULE.encode())]:
        del old[name]
    old[WHOLE.encode()] = json.dumps(cp.policy.to_dict()).encode()  # as encode_checkpoint wrote it before
    back = decode_checkpoint(old)
    assert canonical(back.policy) == canonical(cp.policy) and back.stored is None
    upgraded = encode_checkpoint(back).applied(old)
    assert WHOLE.encode() not in upgraded
    assert canonical(decode_checkpoint(upgraded).policy) == canonical(cp.policy)


def test_a_state_messagepack_cannot_hold_is_written_whole_and_read_back():
    cp = mature()
    stored = encode_checkpoint(cp).applied()
    cp = decode_checkpoint(stored)
    cp.policy.step = 2**70  # a step past 64 bits (json holds it)
    stored = encode_checkpoint(cp).applied(stored)
    assert WHOLE.encode() in stored and HEAD.encode() not in stored
    assert not [n for n in stored if n.startswith(RULE.encode())]
    back = decode_checkpoint(stored)
    assert back.policy.step == 2**70 and canonical(back.policy) == canonical(cp.policy)
    back.policy.step = 5  # and back to the parts
    stored = encode_checkpoint(back).applied(stored)
    assert WHOLE.encode() not in stored and canonical(decode_checkpoint(stored).policy) == canonical(back.policy)


def test_a_stale_checkpoint_lends_only_the_rules_still_stored_as_it_wrote_them():
    """A worker whose cached checkpoint another worker wrote after: unchanged rules are its own objects, changed
    ones decoded from Redis, and the state is the one decoded without it, field for field."""
    mine = mature()
    stored = encode_checkpoint(mine).applied()
    theirs = decode_checkpoint(stored)  # the other worker's turn: it changes two rules and commits
    changed = list(theirs.policy.rules)[:2]
    for rule_id in changed:
        theirs.policy.rules[rule_id].samples += 1
    stored = encode_checkpoint(theirs).applied(stored)
    held = dict(mine.policy.rules)
    back = decode_checkpoint(stored, salvage=mine)
    assert canonical(back.policy) == canonical(decode_checkpoint(stored).policy) == canonical(theirs.policy)
    for rule_id, rs in back.policy.rules.items():
        assert (rs is held[rule_id]) == (rule_id not in changed), rule_id
    assert len(changed) == 2 and len(back.policy.rules) > 10
