"""The event catalogue covers every type the code knows, and docs/events.md is generated from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainwarden.events import catalogue, projection
from trainwarden.events import types as t

DOCS = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def test_every_type_constant_is_catalogued_once() -> None:
    names = [e.name for e in catalogue.CATALOGUE]
    assert len(names) == len(set(names))
    assert set(names) == t.KNOWN_TYPES
    constants = {v for k, v in vars(t).items() if k.isupper() and isinstance(v, str)}
    assert constants - {t.SYSTEM_RUN, t.STOP, t.WAIT, t.CONTINUE} == set(names)


def test_every_type_the_projection_or_worker_outputs_handle_is_catalogued() -> None:
    assert set(projection._HANDLERS) <= set(catalogue.BY_NAME)
    assert set(catalogue.BY_NAME) >= t.WORKER_OUTPUT_TYPES


def test_every_payload_documents_its_fields() -> None:
    for e in catalogue.CATALOGUE:
        fields = catalogue.fields(e.payload)
        assert fields, e.name
        assert e.meaning and e.emitted_by, e.name
        assert all(typ and "typing." not in typ and "<class" not in typ for _, typ, _ in fields), e.name


def test_docs_events_md_is_current() -> None:
    out = subprocess.run([sys.executable, "-m", "trainwarden.events.catalogue"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out == catalogue.render()
    assert DOCS.read_text() == out, "docs/events.md is stale: python -m trainwarden.events.catalogue > docs/events.md"


def test_unknown_types_stay_unknown_but_kept() -> None:
    from trainwarden.events.envelope import make_event

    state = projection.fold([make_event("future.thing", run="r", host="h", producer="p", seq=1, data={"x": 1})])
    assert state.event_count == 1
    assert projection.unknown_types(state) == {"future.thing": 1}


def test_problems_names_missing_and_mistyped_fields() -> None:
    assert catalogue.problems(t.TICK, {"due": 1.5}) == []
    assert catalogue.problems("future.thing", {"anything": object()}) == []
    assert catalogue.problems(t.TICK, {}) == ["tick: missing 'due'"]
    assert catalogue.problems(t.RUN_STARTED, {"pid": "12", "server": "s", "launch": "l:1"}) == [
        "run.started: pid='12' is not int | None"
    ]


def test_what_the_evaluation_path_emits_matches_the_catalogue() -> None:
    from trainwarden.policies.default import default_policy
    from trainwarden.workers.checkpoint import Checkpoint
    from trainwarden.workers.evaluate import evaluate_entries

    from tests.policy_helpers import T0, Clock

    c = Clock("exp1")
    entries = [c.event(t.RUN_LAUNCHED, 0, host="gpu1", session="tw-exp1", config={"lr": 0.1})]
    entries += [c.metric(i + 1, step=i, loss=2.0 - i / 100, lr=3e-4) for i in range(20)]
    entries += [c.metric(30, step=20, loss=float("nan"), lr=3e-4), c.event(t.TICK, 40, due=T0 + 40)]
    entries += [c.event(t.RUN_FAILED, 50, exit_code=1, log_tail=["boom"])]
    step = evaluate_entries(default_policy(), Checkpoint(), [(f"{i}-0", e) for i, e in enumerate(entries)],
                            run="exp1", host="w", now=0.0)  # fmt: skip
    types = {e.type for e in step.outputs}
    assert {t.POLICY_APPLIED, t.DECISION, t.ANOMALY_OPENED, t.STOP_REQUESTED} <= types
    assert [p for e in [*entries, *step.outputs] for p in catalogue.problems(e.type, e.data)] == []


def test_what_agent_and_launcher_helpers_emit_matches_the_catalogue() -> None:
    from trainwarden.agent.logsource import line_item
    from trainwarden.agent.tail import Line
    from trainwarden.remote.liveness import Ended, ended_event

    made = [
        line_item(run="r", host="h", line=Line(0, 30, "step=5 loss=2.5 lr=1.0e-03"), now=1.0),
        line_item(run="r", host="h", line=Line(30, 70, "RuntimeError: CUDA out of memory"), now=2.0),
    ]
    events = [item.event for item in made if item is not None]
    events.append(ended_event("r", {"attempt": 2}, 7, Ended(exit_code=None, log_tail=("x",)), host="h", now=3.0))
    assert [e.type for e in events] == [t.METRIC, t.LOG_LINE, t.RUN_FAILED]
    assert [p for e in events for p in catalogue.problems(e.type, e.data)] == []
