"""Agent restarts do not make the W&B startup check flap: the real agent, restarted, re-announces its
GPU sampling (`nvml`) and its metrics source; the real dispatcher and worker fold them with the
default policy: `wandb-not-connected` opens once and stays open (no RESOLVED, no second ANOMALY)."""

import pytest
from trainwarden.events import types as t
from trainwarden.events.keys import Keys
from trainwarden.events.sids import sid_key

from tests.conftest import spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis]


def test_agent_restarts_neither_resolve_nor_reopen_wandb_not_connected(store, r, tmp_path, settings_file):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=2.0\n")
    procs = [spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher"),
             spawn(settings_file, tmp_path / "worker.log", "worker")]  # fmt: skip
    try:
        for restart in range(2):  # an agent start, then a restart: each announces nvml and the metrics source
            with log.open("a") as f:
                f.write(f"step={restart + 2} loss=1.9\n")
            agent = spawn(settings_file, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}", "--burst")
            assert agent.wait(timeout=60) == 0, (tmp_path / "agent.log").read_text()
        statuses = [(e.data["source"], e.data["status"]) for e in events_of(store, "exp01", t.SOURCE_STATUS)]
        assert statuses == [("nvml", "unavailable"), ("metrics", "log_fallback")] * 2  # what the agent sends
        last = r.xrevrange(Keys().log("exp01"), count=1)[0][0].decode()

        def folded() -> bool:
            after = r.hget(Keys().cursor("exp01"), "after")
            return after is not None and sid_key(after.decode()) >= sid_key(last)

        wait_for(folded, timeout=30, what="the worker to fold the run's events")
    finally:
        for p in procs:
            stop_process(p)
    changes = [e for e in events_of(store, "exp01") if e.type in (t.ANOMALY_OPENED, t.ANOMALY_RESOLVED)]
    assert [e.type for e in changes if e.data["rule"] == "wandb-not-connected"] == [t.ANOMALY_OPENED]
