"""SIGHUP once ended every daemon (exit 129, no log line), where Prometheus and Alertmanager reload. Now each
daemon reloads what it can, logs it in one line and goes on; a file that is invalid is refused in one line
naming its file:line:column and what was in force stays. `trainwarden up` passes SIGHUP on to its daemons.

Real redis-server; `trainwarden up`, the worker, the bot (with the local Slack API) and the agent as processes.
"""

import os
import re
import signal
import subprocess

import pytest
import yaml
from trainwarden.events import types as t

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.faults.test_slack_refusal import Worker as Events
from tests.helpers import events_of, metric, nan_metric, wait_for
from tests.slack_bot import bot_process

pytestmark = [pytest.mark.redis]

POLICY = """\
name: {name}
rules:
  - id: loss-nonfinite
    kind: nonfinite
    metric: loss
    decision: STOP
    severity: critical
"""


def hup(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGHUP)


def said(log, pattern: str, count: int = 1) -> list[str]:
    """Wait until `log` holds `count` lines matching `pattern`; those lines."""

    def lines() -> list[str]:
        found = [line for line in log.read_text(errors="replace").splitlines() if re.search(pattern, line)]
        return found if len(found) >= count else []

    return wait_for(lines, timeout=30, what=f"{count} line(s) matching {pattern!r} in {log.name}")


def test_up_passes_sighup_on_and_every_daemon_reloads_and_goes_on(redis_server, r, tmp_path, settings_file):
    log = tmp_path / "up.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    with open(log, "ab") as sink:
        up = subprocess.Popen([*cli_argv(settings_file, "up", "--logs", str(tmp_path / "logs"))], stdout=sink,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env,
                              cwd=REPO)  # fmt: skip
    try:
        said(log, "all four daemons are running")
        hup(up)
        said(log, r"up +\| SIGHUP: passed on to agent, dispatcher, worker, bot")
        lines = said(log, r"\| .*SIGHUP: (agent|dispatcher|worker|bot) ", count=4)
        assert up.poll() is None, log.read_text()
        hup(up)  # again: nothing wears out
        said(log, r"\| .*SIGHUP: (agent|dispatcher|worker|bot) ", count=8)
        assert up.poll() is None
    finally:
        stop_process(up)
        print(log.read_text(errors="replace")[-4000:])
    text = "\n".join(lines)
    assert "SIGHUP: dispatcher has nothing to reload; going on" in text
    assert re.search(r"SIGHUP: worker policy file \S+ unchanged|SIGHUP: worker no policy file configured", text)
    assert "SIGHUP: agent reloaded its settings: watches unchanged" in text
    assert "SIGHUP: bot reloaded its settings: nothing changed" in text
    assert up.returncode == 0, up.returncode  # stopped by us, not by a daemon's exit


def test_a_worker_takes_an_edited_policy_on_sighup_and_keeps_it_when_the_next_edit_is_invalid(
    store, tmp_path, settings_file
):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(name="first"))
    settings = yaml.safe_load(settings_file.read_text())
    settings_file.write_text(yaml.safe_dump({**settings, "policy": str(policy)}))
    log = tmp_path / "worker.log"
    worker = spawn(settings_file, log, "worker")
    try:
        first = wait_for(lambda: [e for e in events_of(store, t.SYSTEM_RUN, t.POLICY_LOADED)
                                  if e.data["name"] == "first"], what="the first policy")[0]  # fmt: skip
        policy.write_text(POLICY.format(name="second"))
        hup(worker)
        (line,) = said(log, "SIGHUP: worker reloaded policy second")
        assert first.data["policy"] in line
        second = wait_for(lambda: [e for e in events_of(store, t.SYSTEM_RUN, t.POLICY_LOADED)
                                   if e.data["name"] == "second"], what="policy.loaded of the second")[0]  # fmt: skip
        policy.write_text(POLICY.format(name="third") + "  - id: broken\n    kind: nosuchkind\n")
        hup(worker)
        (refused,) = said(log, "SIGHUP: worker refused the policy file")
        assert f"policy {second.data['policy']} stays" in refused and re.search(rf"{policy}:\d+:\d+: ", refused)
        assert worker.poll() is None
        # the second policy is the one in force: it decides the next NaN (no job ran since the edits)
        dispatcher = spawn(settings_file, tmp_path / "dispatcher.log", "dispatcher")
        try:
            store.append([metric("exp01", 1, step=1, loss=2.0), nan_metric("exp01", 2)])
            wait_for(lambda: [e for e in events_of(store, "exp01", t.DECISION) if e.data["decision"] == "STOP"],
                     timeout=30, what="the STOP")  # fmt: skip
        finally:
            stop_process(dispatcher)
    finally:
        stop_process(worker)
        print(log.read_text(errors="replace")[-3000:])
    (stop,) = [e for e in events_of(store, "exp01", t.DECISION) if e.data["decision"] == "STOP"]
    assert stop.data["policy"] == second.data["policy"]


def test_the_bot_takes_edited_routes_on_sighup_and_keeps_them_when_the_next_edit_is_invalid(
    store, slack_api, redis_server, tmp_path
):
    events = Events()
    with bot_process(tmp_path, redis_server.url, slack_api) as bot:
        config = tmp_path / "bot.yaml"
        settings = yaml.safe_load(config.read_text())
        store.append([events.nan("exp01")])
        wait_for(lambda: [m for m in slack_api.messages if "exp01" in m.text], what="the first post")
        assert {m.channel for m in slack_api.messages} == {"C1"}
        settings["slack"]["routes"] = [{"run": "exp*", "channel": "C2"}]
        config.write_text(yaml.safe_dump(settings))
        hup(bot.proc)
        said(bot.log, r"SIGHUP: bot reloaded its settings: slack.routes$")
        store.append([events.nan("exp02")])
        posted = wait_for(lambda: [m for m in slack_api.messages if "exp02" in m.text], what="exp02's post")
        assert {m.channel for m in posted} == {"C2"}
        settings["slack"]["routes"] = [{"run": "exp*", "chanel": "C3"}]
        config.write_text(yaml.safe_dump(settings))
        hup(bot.proc)
        (refused,) = said(bot.log, "SIGHUP: bot refused the settings file, those in force stay: ")
        assert re.search(rf"{config}:\d+:\d+: ", refused) and "\n" not in refused
        store.append([events.nan("exp03")])
        posted = wait_for(lambda: [m for m in slack_api.messages if "exp03" in m.text], what="exp03's post")
        assert {m.channel for m in posted} == {"C2"}  # the routes in force stayed
        assert bot.proc.poll() is None


def test_the_agent_watches_a_run_added_to_its_settings_on_sighup(store, tmp_path, settings_file):
    logs = {run: tmp_path / f"{run}.log" for run in ("exp01", "exp02")}
    for path in logs.values():
        path.write_text("step=1 loss=2.0\nstep=2 loss=1.9\n")
    settings = yaml.safe_load(settings_file.read_text())
    settings["agent"]["watch"] = [{"run": "exp01", "log": str(logs["exp01"])}]
    settings_file.write_text(yaml.safe_dump(settings))
    log = tmp_path / "agent.log"
    agent = spawn(settings_file, log, "agent")
    try:
        wait_for(lambda: events_of(store, "exp01", t.METRIC), what="exp01's metrics")
        settings_file.write_text(settings_file.read_text() + "nonsense: [\n")
        hup(agent)
        (refused,) = said(log, "SIGHUP: agent refused the settings file")
        assert re.search(rf"{settings_file}:\d+:\d+: ", refused)
        settings["agent"]["watch"].append({"run": "exp02", "log": str(logs["exp02"])})
        settings_file.write_text(yaml.safe_dump(settings))
        hup(agent)
        said(log, r"SIGHUP: agent reloaded its settings: watches \+exp02$")
        wait_for(lambda: events_of(store, "exp02", t.METRIC), what="exp02's metrics")
        assert agent.poll() is None
    finally:
        stop_process(agent)
        print(log.read_text(errors="replace")[-3000:])
