"""The files the bot shares in a run's thread: a STOP's chart and report, a critical anomaly's chart.

Read from Redis, where the worker keeps them for a while (events/packfiles.py), so that a bot on
another machine than the worker has them; else from the pack directory, when this machine can read
it (one machine, or a shared disk). Neither: no upload, one warning, the messages go on.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import cast

from trainwarden.events import packfiles
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.errors import StoreError
from trainwarden.events.store import EventStore

log = logging.getLogger(__name__)

ORDER = (packfiles.CHART, packfiles.REPORT)  # the chart first: it is what a phone shows


def pack_files(store: EventStore, event: Event) -> tuple[tuple[str, bytes], ...]:
    """The chart and report of the pack an `evidence.built` / `evidence.failed` names; () when there is no
    chart to share (a report alone is not worth an upload: the STOPPED message names the pack)."""
    decision = cast(p.EvidenceBuiltData, event.data).get("decision") or ""
    try:
        files = packfiles.read(store.redis, store.keys, run=event.run, event_id=decision)
    except StoreError as exc:
        log.warning("could not read the evidence files of %s from Redis: %s", event.run, exc)
        files = {}
    if packfiles.CHART not in files:
        files = _from_disk(event) or files
    if packfiles.CHART not in files:
        log.warning("no chart of %s to upload to Slack (not in Redis, pack %s not readable here)", event.run,
                    _pack_dir(event) or "not written")  # fmt: skip
        return ()
    return tuple((name, files[name]) for name in ORDER if name in files)


def anomaly_chart(store: EventStore, event: Event) -> tuple[tuple[str, bytes], ...]:
    """The chart an `anomaly.charted` says the worker kept (under the anomaly's id); () when it is gone."""
    anomaly = cast(p.AnomalyChartedData, event.data).get("anomaly") or ""
    try:
        chart = packfiles.read(store.redis, store.keys, run=event.run, event_id=anomaly).get(packfiles.CHART)
    except StoreError as exc:
        log.warning("could not read the chart of %s's anomaly from Redis: %s", event.run, exc)
        return ()
    if chart is None:
        log.warning("the chart of %s's anomaly %s is no longer in Redis; no upload", event.run, anomaly)
        return ()
    return ((packfiles.CHART, chart),)


def _pack_dir(event: Event) -> str | None:
    if event.type == t.EVIDENCE_BUILT:
        return cast(p.EvidenceBuiltData, event.data).get("path")
    return cast(p.EvidenceFailedData, event.data).get("pack")


def _from_disk(event: Event) -> dict[str, bytes]:
    pack_dir = _pack_dir(event)
    if not pack_dir:
        return {}
    out: dict[str, bytes] = {}
    for name in ORDER:
        try:
            out[name] = (Path(pack_dir) / name).read_bytes()
        except OSError:
            continue
    return out
