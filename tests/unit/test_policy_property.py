"""Property: evaluating a run incrementally, with worker restarts (checkpoint round trips) and
pages cut at random points, yields exactly the outputs of one full pass, and `--verify` of the
resulting log finds nothing to report."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainwarden.events import types as t
from trainwarden.events.codec import encode
from trainwarden.events.envelope import Event, make_event
from trainwarden.policies.default import default_policy
from trainwarden.workers.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from trainwarden.workers.evaluate import evaluate_entries
from trainwarden.workers.verify import verify_run

POLICY = default_policy()
RUN = "prop"
T0 = 1_800_000_000.0

loss_values = st.one_of(
    st.floats(min_value=0.5, max_value=3.0),  # normal
    st.floats(min_value=6.0, max_value=20.0),  # a spike
    st.sampled_from([math.nan, math.inf]),
)
actions = st.one_of(
    st.tuples(st.just("metric"), loss_values, st.floats(min_value=0.1, max_value=300.0),
              st.floats(min_value=1000.0, max_value=20000.0)),
    st.tuples(st.just("val"), st.floats(min_value=1.0, max_value=3.0)),
    st.tuples(st.just("gpu"), st.integers(min_value=0, max_value=100), st.integers(min_value=40, max_value=95)),
    st.tuples(st.just("log"), st.sampled_from(["CUDA out of memory", "Traceback (most recent call last):", "ok"])),
    st.tuples(st.just("status"), st.sampled_from(["wandb_ok", "log_fallback", "unreachable"])),
    st.tuples(st.just("tick")),
    st.tuples(st.just("gap"), st.floats(min_value=60.0, max_value=1500.0)),
)  # fmt: skip


def build(script: list[tuple]) -> list[Event]:
    ts, step, seq = T0, 0, 0
    out = [make_event(t.RUN_LAUNCHED, run=RUN, host="gpu1", producer="launch", seq=1, ts=ts,
                      data={"config": {"baseline": {"val_loss": 2.0}}})]  # fmt: skip
    for action in script:
        kind = action[0]
        ts += 30.0
        seq += 1
        if kind == "gap":
            ts += action[1]
            continue
        if kind == "metric":
            step += 10
            typ, data = t.METRIC, {"step": step, "loss": action[1], "grad_norm": action[2], "lr": 3e-4,
                                   "tokens_per_s": action[3]}  # fmt: skip
        elif kind == "val":
            typ, data = t.METRIC, {"step": step, "val_loss": action[1]}
        elif kind == "gpu":
            typ, data = t.GPU, {"util": action[1], "temp": action[2]}
        elif kind == "log":
            typ, data = t.LOG_LINE, {"line": action[1], "tag": "error"}
        elif kind == "status":
            typ, data = t.SOURCE_STATUS, {"status": action[1]}
        else:
            typ, data = t.TICK, {"due": ts}
        out.append(make_event(typ, run=RUN, host="gpu1", producer="agent", seq=seq, ts=ts, data=data))
    return out


def key(event: Event) -> tuple[str, str, bytes]:
    return event.id, event.type, encode(event)


def round_trip(cp: Checkpoint, stored: dict[bytes, bytes]) -> Checkpoint:
    """Write `cp` over the hash `stored` (in place: only its changed rules) and read it back."""
    written = encode_checkpoint(cp).applied(stored)
    stored.clear()
    stored.update(written)
    return decode_checkpoint(stored)


def incremental(inputs: list[Event], cuts: list[int], restarts: set[int]) -> tuple[list, list[Event]]:
    """Like the worker: inputs arrive in batches; each page's outputs are appended to the log and read back."""
    log: list[tuple[str, Event]] = []
    outputs: list[Event] = []
    cp = Checkpoint()
    stored: dict[bytes, bytes] = {}
    position = 0
    arrived = 0
    for n, cut in enumerate([*cuts, len(inputs)]):
        for e in inputs[arrived:cut]:
            log.append((f"{len(log) + 1}-0", e))
        arrived = max(arrived, cut)
        while position < len(log):
            page = log[position : position + 1 + (n * 7) % 5]
            step = evaluate_entries(POLICY, cp, page, run=RUN, host="w", now=0.0)
            position += len(page)
            for e in step.outputs:
                log.append((f"{len(log) + 1}-0", e))
            outputs += step.outputs
            if n in restarts:
                cp = round_trip(cp, stored)
    return log, outputs


def test_the_generated_runs_exercise_the_policy():
    script = [("metric", 1.0, 1.0, 12000.0)] * 30 + [("metric", 9.0, 1.0, 12000.0)] * 6 + [("gap", 1200.0), ("tick",)]
    _, outputs = incremental(build(script), [5, 17], {0, 1})
    opened = [e.data.get("rule") for e in outputs if e.type == t.ANOMALY_OPENED]
    # 9x the run's best: a runaway as well; 20 minutes without a step: stalled, and silent
    assert opened == ["loss-spike", "loss-runaway", "run-stalled", "run-silent"]
    assert [e.data["decision"] for e in outputs if e.type == t.DECISION] == [t.CONTINUE, t.STOP]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(actions, min_size=1, max_size=120), data=st.data())
def test_incremental_with_restarts_equals_one_full_pass(script, data):
    inputs = build(script)
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(inputs)), max_size=8)))
    restarts = set(data.draw(st.lists(st.integers(min_value=0, max_value=len(cuts)), max_size=8)))
    log, outputs = incremental(inputs, cuts, restarts)
    full = evaluate_entries(POLICY, Checkpoint(), [(f"{i}-0", e) for i, e in enumerate(inputs, 1)], run=RUN,
                            host="w", now=0.0).outputs  # fmt: skip
    assert [key(e) for e in outputs] == [key(e) for e in full]
    assert verify_run(RUN, log, lambda digest: POLICY).ok
