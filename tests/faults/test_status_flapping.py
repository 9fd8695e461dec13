"""The W&B startup check, with the real agent, dispatcher and worker and the default policy.

A run that uses W&B (its watch names a W&B directory; no run directory appears in it) gets
`wandb-not-connected`, and agent restarts (each re-announces its GPU sampling, `nvml`, and its
metrics source) neither resolve nor reopen it. A run that shows no sign of W&B takes its metrics
from its log (`log`, not `log_fallback`) and gets no W&B anomaly at all."""

import subprocess

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.events.keys import Keys
from trainwarden.events.sids import sid_key

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis]


def test_wandb_not_connected_only_for_a_run_that_uses_wandb_and_agent_restarts_do_not_flap(
    store, r, tmp_path, settings_file
):
    log, plain = tmp_path / "train.log", tmp_path / "plain.log"
    log.write_text("step=1 loss=2.0\n")
    plain.write_text("step=1 loss=2.0\n")
    (tmp_path / "wb").mkdir()
    body = yaml.safe_load(settings_file.read_text())
    body["agent"]["watch"] = [{"run": "exp01", "log": str(log), "wandb_dir": str(tmp_path / "wb")}]
    settings_file.write_text(yaml.safe_dump(body))
    procs = [spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher"),
             spawn(settings_file, tmp_path / "worker.log", "worker")]  # fmt: skip
    try:
        for restart in range(2):  # an agent start, then a restart: each announces nvml and the metrics source
            for path in (log, plain):
                with path.open("a") as f:
                    f.write(f"step={restart + 2} loss=1.9\n")
            argv = cli_argv(settings_file, "agent", "--watch", f"exp02={plain}", "--burst")
            argv[argv.index("WARNING")] = "INFO"  # its "watching ..." line, read below
            agent = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
            assert agent.returncode == 0, agent.stderr
            # the agent's log names what it watches by run and path, never as a Python object
            assert f"exp02={plain}" in agent.stderr and " at 0x" not in agent.stderr, agent.stderr
        statuses = [(e.data["source"], e.data["status"]) for e in events_of(store, "exp01", t.SOURCE_STATUS)]
        assert statuses == [("nvml", "unavailable"), ("metrics", "log_fallback")] * 2  # what the agent sends
        plain_statuses = [(e.data["source"], e.data["status"]) for e in events_of(store, "exp02", t.SOURCE_STATUS)]
        assert plain_statuses == [("nvml", "unavailable"), ("metrics", "log")] * 2
        lasts = {run: r.xrevrange(Keys().log(run), count=1)[0][0].decode() for run in ("exp01", "exp02")}

        def folded() -> bool:
            for run, last in lasts.items():
                after = r.hget(Keys().cursor(run), "after")
                if after is None or sid_key(after.decode()) < sid_key(last):
                    return False
            return True

        wait_for(folded, timeout=30, what="the worker to fold both runs' events")
    finally:
        for p in procs:
            stop_process(p)
    changes = [e for e in events_of(store, "exp01") if e.type in (t.ANOMALY_OPENED, t.ANOMALY_RESOLVED)]
    assert [e.type for e in changes if e.data["rule"] == "wandb-not-connected"] == [t.ANOMALY_OPENED]
    opened = [e.data["rule"] for e in events_of(store, "exp02", t.ANOMALY_OPENED)]
    assert not [rule for rule in opened if rule.startswith("wandb")], opened
