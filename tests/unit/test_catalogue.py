"""The event catalogue covers every type the code knows, and docs/events.md and events/types.py are generated
from the one declaration of each type (events/registry.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from trainwarden.events import catalogue, projection, registry
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "events.md"
TYPES = ROOT / "events" / "types.py"
PACKAGES = ("agent", "archive", "bot", "events", "policies", "remote", "trainwarden", "workers")


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
    assert DOCS.read_text() == out, "docs/events.md is stale: python -m trainwarden.events.catalogue --write"


def test_types_py_is_current() -> None:
    out = subprocess.run([sys.executable, "-m", "trainwarden.events.catalogue", "types"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out == catalogue.render_types()
    assert TYPES.read_text() == out, "events/types.py is stale: python -m trainwarden.events.catalogue --write"


def test_write_refuses_to_run_outside_a_checkout(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "trainwarden.events.catalogue", "--write"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2
    assert "root of a trainwarden checkout" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_every_declaration_is_whole() -> None:
    """Payload, meaning, emitter, where it is appended and a replay line that reads an empty payload."""
    for e in catalogue.CATALOGUE:
        assert isinstance(e.payload, type) and e.payload.__annotations__, e.name
        assert e.meaning and e.emitted_by and e.log, e.name
        line = e.describe(make_event(e.name, run="r", host="h", producer="p", seq=1, data={}))
        assert isinstance(line, str), e.name
        assert getattr(t, e.constant) == e.name


def test_every_constant_of_types_py_is_declared() -> None:
    not_types = {t.SYSTEM_RUN, t.STOP, t.WAIT, t.CONTINUE}
    constants = {v for k, v in vars(t).items() if k.isupper() and isinstance(v, str)} - not_types
    assert constants == set(registry.REGISTRY) == t.KNOWN_TYPES
    assert {e.name for e in catalogue.CATALOGUE if e.worker_output} == t.WORKER_OUTPUT_TYPES


def _on_arguments() -> list[tuple[str, ast.expr]]:
    """(file:line, argument) of every `@on(...)` and `@table.on(...)` decorator in the packages."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    for deco in node.decorator_list:
                        if not isinstance(deco, ast.Call):
                            continue
                        name = getattr(deco.func, "id", None) or getattr(deco.func, "attr", None)
                        if name == "on":  # @on(...) and @table.on(...)
                            found += [(f"{path.relative_to(ROOT)}:{deco.lineno}", a) for a in deco.args]
    return found


def test_every_type_an_on_decorator_names_is_declared() -> None:
    found = _on_arguments()
    where = {w.split(":")[0] for w, _ in found}
    tables = {
        "events/projection.py",
        "events/urgency.py",
        "remote/plan.py",
        "workers/evaluate.py",
        "bot/messages.py",
        "bot/stages.py",
        "policies/engine.py",
    }
    assert tables <= where  # the scan finds them
    for where, arg in found:
        if isinstance(arg, ast.Attribute):  # t.RUN_LAUNCHED
            assert arg.attr in vars(t) and vars(t)[arg.attr] in registry.REGISTRY, where
        else:
            assert isinstance(arg, ast.Constant) and arg.value in registry.REGISTRY, where


def test_a_second_declaration_of_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        registry.declare(t.TICK, dict, meaning="again", emitted_by="a test")
    assert registry.REGISTRY[t.TICK].meaning != "again"


def test_replay_lines_come_from_the_declarations() -> None:
    from trainwarden.ops.render import describe

    tick = make_event(t.TICK, run="r", host="h", producer="p", seq=1, data={"due": 1.0})
    assert describe(tick) == "scheduled evaluation of a quiet run" == registry.REGISTRY[t.TICK].describe(tick)
    watched = make_event(t.RUN_WATCHED, run="r", host="h", producer="p", seq=2, data={"host": "h", "pid": 3})
    assert describe(watched) == "host=h pid=3"  # no describer of its own: its fields
    future = make_event("future.thing", run="r", host="h", producer="p", seq=3, data={"x": [1]})
    assert describe(future) == "(unknown type, kept) x=[1]"


def test_unknown_types_stay_unknown_but_kept() -> None:
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


def test_a_dispatch_table_refuses_a_second_handler_for_a_type() -> None:
    from collections.abc import Callable

    from trainwarden.events.dispatch import Dispatch

    table: Dispatch[Callable[..., object]] = Dispatch("a test's table")
    table.on(t.TICK, t.METRIC)(len)
    with pytest.raises(ValueError, match=r"a test's table: 'tick' has a handler already"):
        table.on(t.TICK)(repr)
    assert table.handlers == {t.TICK: len, t.METRIC: len}
