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
