"""Which encoding for the workers' policy state: json (the baseline), orjson or msgspec's MessagePack, same run.

The state of a mature run (default policy, `--events` healthy metric events through the worker's own step) is
encoded and decoded whole, and rule by rule (what a turn writes when only the rules that changed are written:
every rule encoded, compared with the bytes stored, the changed ones sent). Each figure is the best of
`--repeats` timings of `--turns` encodes (`time.process_time`), in µs a turn, with its ratio to json; and
whether the state reads back equal, field for field (orjson writes a NaN as null: a NaN loss in a window
would not read back).

    .venv/bin/python bench/state_codec.py [--events 2300] [--turns 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from policy import training_events
from trainwarden.policies.default import default_policy
from trainwarden.policies.state import PolicyState, RuleState
from trainwarden.workers.checkpoint import Checkpoint, encode_checkpoint
from trainwarden.workers.evaluate import evaluate_entries
from trainwarden.workers.state_parts import HEAD, RULE, WHOLE, decode_rule, encode_rule


def mature_state(events: int) -> PolicyState:
    cp = Checkpoint()
    entries = [(f"{i}-0", e) for i, e in enumerate(training_events("bench", 1, events), 1)]
    evaluate_entries(default_policy(), cp, entries, run="bench", host="h", now=1.0)
    cp.policy.rules["nan-probe"] = RuleState(sig="x", kind_state={"window": [[1.0, float("nan")]]})
    return cp.policy


def best_us(fn: Callable[[], Any], turns: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(turns):
            fn()
        best = min(best, time.process_time() - t0)
    return best / turns * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2300)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import msgspec
    import orjson

    state = mature_state(args.events)
    rules = list(state.rules.values())
    whole = state.to_dict()
    enc = msgspec.msgpack.Encoder()
    dec = msgspec.msgpack.Decoder()
    codecs: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
        "json": (lambda o: json.dumps(o).encode(), json.loads),
        "orjson": (orjson.dumps, orjson.loads),
        "msgspec msgpack": (enc.encode, dec.decode),
    }
    print(f"state: {len(rules)} rules, {len(json.dumps(whole))} B of JSON")
    head = f"{'codec':<18} {'whole enc':>10} {'whole dec':>10} {'rules enc':>10} {'bytes':>7} {'equal':>6}"
    print(f"{head}  ratio to json (whole enc / whole dec / rules enc)")
    base: tuple[float, float, float] | None = None
    for name, (encode, decode) in codecs.items():
        w_enc = best_us(lambda e=encode: e(state.to_dict()), args.turns, args.repeats)  # type: ignore[misc]
        blob = encode(whole)
        w_dec = best_us(lambda d=decode, b=blob: PolicyState.from_dict(d(b)), args.turns, args.repeats)  # type: ignore[misc]
        r_enc = best_us(lambda e=encode: [e(_fields(rs)) for rs in rules], args.turns, args.repeats)  # type: ignore[misc]
        back = PolicyState.from_dict(decode(blob))
        equal = _same(back.to_dict(), whole)
        base = base or (w_enc, w_dec, r_enc)
        print(f"{name:<18} {w_enc:>8.1f}µs {w_dec:>8.1f}µs {r_enc:>8.1f}µs {len(blob):>7} {equal!s:>6}  "
              f"{w_enc / base[0]:.2f} / {w_dec / base[1]:.2f} / {r_enc / base[2]:.2f}")  # fmt: skip
    parts = best_us(lambda: [encode_rule(rs) for rs in rules], args.turns, args.repeats)
    check = all(decode_rule(encode_rule(rs)) == rs or _same(decode_rule(encode_rule(rs)).to_dict(), rs.to_dict())
                for rs in rules)  # fmt: skip
    print(f"workers/state_parts.py encode_rule (chosen), every rule: {parts:.1f}µs a turn, reads back: {check}")
    print(f"Redis MEMORY USAGE of the checkpoint, whole JSON vs in parts: {checkpoint_memory(state)}")


def checkpoint_memory(state: PolicyState) -> str:
    """The stored checkpoint's size in a private redis-server: the state whole as JSON (before) and in parts."""
    import redis
    from harness import private_redis

    state.rules.pop("nan-probe", None)
    parts = encode_checkpoint(Checkpoint(policy=state)).fields
    whole = {k: v for k, v in parts.items() if k != HEAD and not k.startswith(RULE)}
    whole[WHOLE] = json.dumps(state.to_dict())
    with private_redis() as server:
        client = redis.Redis(port=server.port)
        client.hset("whole", mapping=whole)
        client.hset("parts", mapping=parts)
        before, after = client.memory_usage("whole", samples=0), client.memory_usage("parts", samples=0)
    return f"{before} B -> {after} B ({after / before:.2f})"


def _fields(rs: RuleState) -> list[Any]:
    return [getattr(rs, name) for name in RuleState.__slots__]


def _same(a: Any, b: Any) -> bool:
    """Equal, a NaN equal to a NaN (json's and msgpack's NaN read back as NaN; orjson's as None)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


if __name__ == "__main__":
    main()
