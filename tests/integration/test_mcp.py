"""`trainwarden mcp` driven by the real `mcp` client library, as an agent drives it: the server a real subprocess on
stdio (and once on streamable HTTP), a real redis-server, runs whose events the test publishes, the real worker code
carrying out a stop in real tmux. Reads say what the CLI says; a stop is audited with the caller's identity, shows up
in `replay`, and is refused (audited, nothing else done) when the settings do not allow it."""

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
import yaml
from trainwarden.events import types as t
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget
from trainwarden.workers.process import process_run

from tests import mcp_client
from tests.conftest import REPO, cli_argv, stop_process
from tests.helpers import events_of, wait_for
from tests.integration.test_check_cli import Run, training_log
from tests.report_format import skill_fields
from tests.unit.test_plan_gate import plan_events
from trainwarden.tools.redis_server import free_port

pytestmark = [pytest.mark.redis, pytest.mark.tmux]

TOOLS = {"check", "status", "runs", "replay", "policy_backtest", "stop", "launch"}
ACTIONS = {"stop", "launch"}
TRAIN = (  # a training loop that runs until it is stopped
    "import time\nfor i in range(1, 10000):\n"
    "    print(f'step={i} loss={3.0 / i + 1:.4f}', flush=True)\n    time.sleep(0.2)\n"
)


def allow(settings_file, **mcp):
    body = yaml.safe_load(settings_file.read_text())
    body["mcp"] = mcp
    settings_file.write_text(yaml.safe_dump(body))
    return settings_file


def cli(settings_file, *args):
    return subprocess.run(cli_argv(settings_file, *args), capture_output=True, text=True, cwd=REPO, timeout=60,
                          check=False)  # fmt: skip


def launched(store, tmp_path, tmux_socket, run):
    """A real run in tmux, launched as `trainwarden launch` does (so trainwarden knows how to stop it)."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    spec = LaunchSpec(run=run, command=(sys.executable, str(script)), workdir=tmp_path, tmux_socket=tmux_socket,
                      log_path=tmp_path / f"{run}.log", wandb=False)  # fmt: skip
    event = launch_local(spec, store=store, host="testhost")
    target = StopTarget.from_launch(run, event.data, default_host="testhost")
    assert wait_for(lambda: LocalTmuxController().is_running(target), what="the run in tmux")
    return target


def test_it_lists_its_tools_and_marks_the_reads_read_only(settings_file, tmp_path):
    with mcp_client.stdio(settings_file, tmp_path / "mcp.log") as client:
        tools = {tool.name: tool for tool in client.tools()}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.description, name
        assert tool.annotations is not None and tool.annotations.read_only_hint is (name not in ACTIONS), name
    assert tools["stop"].annotations.destructive_hint is True
    assert tools["check"].input_schema["required"] == ["run"]
    assert "run" in tools["stop"].input_schema["properties"] and "reason" in tools["stop"].input_schema["properties"]


def test_check_status_and_runs_read_what_the_cli_reads(store, settings_file, worker_ctx, tmp_path):
    run = Run(store, "exp21", log_path=training_log(tmp_path, "exp21"))
    run.source("log")
    run.metrics(range(10, 60, 10))
    with mcp_client.stdio(settings_file, tmp_path / "mcp.log") as client:
        report = client.text("check", run="exp21")
        listed = client.data("runs")
        overview = client.text("status")
        detail = client.text("status", run="exp21")
        unknown = client.call("check", run="nope")
        bad_interval = client.call("check", run="exp21", interval="soon")
    by_cli = cli(settings_file, "check", "exp21")
    assert by_cli.returncode == 0, by_cli.stderr
    fields, cli_fields = skill_fields(report), skill_fields(by_cli.stdout)
    assert (fields["source"], fields["decision"], fields["reason"]) == ("log_fallback", "CONTINUE", "healthy")
    assert fields["run"] == "exp21 on gpu1 (running, step 50)"
    for same in ("source", "run", "metrics", "anomalies", "evidence", "decision", "reason"):
        assert fields[same] == cli_fields[same], same
    assert [r["run"] for r in listed] == ["exp21"]  # the system log is not a run
    assert listed[0] | {"last_event": None} == {
        "run": "exp21",
        "status": "running",
        "host": "gpu1",
        "step": 50,
        "open_anomalies": [],
        "decision": "CONTINUE",
        "last_event": None,
    }
    assert "exp21" in overview and "running" in overview
    assert detail.splitlines()[0].count("exp21") == 1 and "running" in detail
    assert unknown.is_error
    assert "unknown run 'nope'" in mcp_client.text_of(unknown) and "`runs` tool" in mcp_client.text_of(unknown)
    assert bad_interval.is_error and "interval: 'soon' is not a duration" in mcp_client.text_of(bad_interval)


def test_a_stop_through_mcp_is_carried_out_and_shows_in_replay_with_the_callers_identity(
    store, settings_file, worker_ctx, tmp_path, tmux_socket
):
    allow(settings_file, allow_actions=["stop"], identity="research-agent")
    target = launched(store, tmp_path, tmux_socket, "exp30")
    before = time.time()
    with mcp_client.stdio(settings_file, tmp_path / "mcp.log") as client:
        said = client.text("stop", run="exp30", reason="eval loss flat for 3 checks")
        process_run("exp30", [])  # the worker carries it out, as on every new event
        timeline = client.text("replay", run="exp30")
        earlier = client.text("replay", run="exp30", as_of=f"{before:.3f}")
        again = client.call("stop", run="exp30")
    print(timeline)  # shown when the test fails
    (asked,) = events_of(store, "exp30", t.STOP_REQUESTED)
    assert said.startswith(f"stop requested for exp30 by mcp:research-agent (request {asked.id})")
    assert asked.data == {"by": "mcp", "user": "mcp:research-agent", "reason": "eval loss flat for 3 checks"}
    (done,) = events_of(store, "exp30", t.STOP_DONE)
    assert done.data["request"] == asked.id and done.data["by"] == "mcp"
    assert not LocalTmuxController().is_running(target)
    received = events_of(store, "exp30", t.COMMAND_RECEIVED)
    assert [(c.data["command"], c.data["user"], c.data["via"]) for c in received] == [
        ("stop", "mcp:research-agent", "mcp"), ("stop", "mcp:research-agent", "mcp")]  # fmt: skip
    assert received[0].data["text"] == "stop exp30 eval loss flat for 3 checks"
    asked_line = re.compile(r"stop\.requested +by mcp \(mcp:research-agent\): eval loss flat for 3 checks")
    assert asked_line.search(timeline) and "stop.done" in timeline and re.search(r"status: +stopped", timeline)
    assert "stop.requested" not in earlier and re.search(r"status: +launched", earlier)  # as of before the stop
    by_cli = cli(settings_file, "replay", "exp30")
    assert asked_line.search(by_cli.stdout), by_cli.stdout + by_cli.stderr
    assert again.is_error and "has ended already (stopped)" in mcp_client.text_of(again)
    assert len(events_of(store, "exp30", t.STOP_REQUESTED)) == 1


def test_a_stop_that_waits_says_the_outcome(store, settings_file, worker_ctx, tmp_path, tmux_socket):
    allow(settings_file, allow_actions=True)
    target = launched(store, tmp_path, tmux_socket, "exp32")

    def worker():  # a worker that takes the request up once it is there, while the tool call waits
        wait_for(lambda: events_of(store, "exp32", t.STOP_REQUESTED), timeout=30, what="stop.requested")
        process_run("exp32", [])

    carrying_out = threading.Thread(target=worker)
    carrying_out.start()
    try:
        with mcp_client.stdio(settings_file, tmp_path / "mcp.log") as client:
            said = client.text("stop", run="exp32", wait_s=60)
    finally:
        carrying_out.join(timeout=60)
    assert said.startswith("stopped exp32: sent Ctrl-C to train-exp32; it exited after "), said
    assert not LocalTmuxController().is_running(target)
    (asked,) = events_of(store, "exp32", t.STOP_REQUESTED)
    assert asked.data["user"] == "mcp:pytest-agent" and asked.data["reason"] == "stopped by an agent over MCP"


def test_actions_are_refused_unless_the_settings_allow_them_and_the_refusal_is_audited(
    store, settings_file, tmp_path, tmux_socket
):
    target = launched(store, tmp_path, tmux_socket, "exp31")
    with mcp_client.stdio(settings_file, tmp_path / "mcp.log", name="Claude Code") as client:
        stop = client.call("stop", run="exp31", reason="looks bad HF_TOKEN=hf_abcdefghijklmnop1234")
        launch = client.call("launch", experiment="exp-new")
        still = client.text("check", run="exp31")
    assert stop.is_error and launch.is_error
    refusal = mcp_client.text_of(stop)
    assert "stop is not allowed for MCP clients (mcp:Claude-Code): the settings allow none" in refusal
    assert "mcp: {allow_actions: [stop]}" in refusal
    assert "launch is not allowed" in mcp_client.text_of(launch)
    assert events_of(store, "exp31", t.STOP_REQUESTED) == []
    assert LocalTmuxController().is_running(target)
    assert "Run: exp31 on testhost (launched" in still
    audited = [e for e in events_of(store, "exp31") if e.type.startswith("command.")]
    audit = [(e.type, e.data["command"], e.data["user"]) for e in audited]
    assert audit == [(t.COMMAND_RECEIVED, "stop", "mcp:Claude-Code"), (t.COMMAND_DENIED, "stop", "mcp:Claude-Code")]
    assert {e.data["text"] for e in audited} == {"stop exp31 looks bad HF_TOKEN=***"}  # a secret is never recorded
    system = [(e.type, e.data["text"]) for e in events_of(store, t.SYSTEM_RUN) if e.type.startswith("command.")]
    assert system == [(t.COMMAND_RECEIVED, "launch exp-new"), (t.COMMAND_DENIED, "launch exp-new")]  # no such run


def test_replay_and_policy_backtest_through_mcp(store, settings_file, worker_ctx, tmp_path):
    run = Run(store, "exp40", log_path=training_log(tmp_path, "exp40"))
    run.metrics(range(10, 40, 10))
    run.add(t.METRIC, 40, step=40, loss=float("nan"))
    process_run("exp40", [])
    with mcp_client.stdio(settings_file, tmp_path / "mcp.log") as client:
        anomalies = client.text("replay", run="exp40", types=["anomaly"])
        on_run = client.text("policy_backtest", run="exp40")
        on_log = client.text("policy_backtest", log=str(training_log(tmp_path, "plain")), as_json=True)
        no_source = client.call("policy_backtest")
        bad_time = client.call("replay", run="exp40", as_of="someday")
    assert "anomaly.opened" in anomalies and "loss-nonfinite" in anomalies and "metric " not in anomalies
    assert "Backtest of policy 'default'" in on_run and "over run exp40" in on_run
    assert "loss-nonfinite" in on_run and "Would have stopped at step 40" in on_run
    assert '"stop": null' in on_log and '"metrics": 40' in on_log
    assert no_source.is_error and "give the history to backtest" in mcp_client.text_of(no_source)
    assert bad_time.is_error and "as_of" in mcp_client.text_of(bad_time)


def post(port, headers):
    """A ping to the HTTP server with these headers: (status, body)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_streamable_http_on_loopback(store, settings_file, tmp_path):
    Run(store, "exp50", log_path=tmp_path / "exp50.log").source("log")
    port = free_port()
    log = tmp_path / "mcp-http.log"
    with open(log, "wb") as sink:
        argv = [sys.executable, *mcp_client.server_argv(settings_file, "--http", "--port", str(port))]
        server = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
                                  env=dict(os.environ), start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: f"http://127.0.0.1:{port}/mcp" in log.read_text(), timeout=30, what="the HTTP server")
        wait_for(lambda: "Uvicorn running" in log.read_text(), timeout=30, what="uvicorn listening")
        with mcp_client.http(f"http://127.0.0.1:{port}/mcp") as client:
            assert {tool.name for tool in client.tools()} == TOOLS
            assert [r["run"] for r in client.data("runs")] == ["exp50"]
        rebound = post(port, {"Host": "evil.example"})  # a web page's DNS rebinding: refused
        assert rebound == (421, "Invalid Host header")
        assert post(port, {"Origin": "http://evil.example"}) == (403, "Invalid Origin header")
    finally:
        stop_process(server)
        print(log.read_text()[-3000:])


def test_an_unreachable_redis_is_said_per_call_with_the_fix(tmp_path):
    settings = tmp_path / "tw.yaml"
    settings.write_text(f"redis_url: redis://127.0.0.1:{free_port()}/0\nhost: testhost\n")
    with mcp_client.stdio(settings, tmp_path / "mcp.log") as client:  # the server starts all the same
        runs = client.call("runs")
        check = client.call("check", run="exp01")
    for result in (runs, check):
        assert result.is_error
        said = mcp_client.text_of(result)
        assert "Redis unreachable" in said and "is Redis running there?" in said, said


def test_a_launch_a_plan_holds_back_is_refused_in_the_tools_words_and_force_goes_on_to_the_wandb_guard(
    store, settings_file, tmp_path
):
    """No SSH is needed: the plan and the W&B guard refuse before the server is reached (it is not there)."""
    servers = tmp_path / "servers.yaml"
    servers.write_text(yaml.safe_dump({"servers": [{"name": "gpu1", "host": "127.0.0.1", "port": free_port(),
                                                    "user": "nobody", "work_dir": str(tmp_path)}]}))  # fmt: skip
    (tmp_path / "experiments").mkdir()
    offline = {"server": "gpu1", "command": "python train.py", "env": {"WANDB_MODE": "offline"}}
    for name in ("exp1", "exp2"):
        (tmp_path / "experiments" / f"exp-{name}.yaml").write_text(yaml.safe_dump({"name": name, **offline}))
    body = yaml.safe_load(settings_file.read_text())
    body.update(servers_file=str(servers), experiments_dir=str(tmp_path / "experiments"),
                mcp={"allow_actions": ["launch"], "identity": "orchestrator"})  # fmt: skip
    settings_file.write_text(yaml.safe_dump(body))
    store.append(plan_events("P", time.time() - 100, ("exp1", "running", {})))  # exp2 waits for exp1 in plan P
    with mcp_client.stdio(settings_file, tmp_path / "mcp.log") as client:
        held = client.call("launch", experiment="exp2")
        forced = client.call("launch", experiment="exp2", force=True)
    assert held.is_error and forced.is_error
    assert "exp2 waits for exp1 in plan P" in mcp_client.text_of(held)
    assert "or `launch experiment=exp2 force=true` to launch outside the plan" in mcp_client.text_of(held)
    assert "W&B would not record this run (env sets WANDB_MODE=offline)" in mcp_client.text_of(forced)
    assert [e.data["check"] for e in events_of(store, "exp2", t.LAUNCH_REFUSED)] == ["plan", "wandb_guard"]
    assert [e.data["user"] for e in events_of(store, "exp2", t.LAUNCH_FAILED)] == ["mcp:orchestrator"]  # the forced one
    assert events_of(store, "exp2", t.RUN_LAUNCHED) == []
