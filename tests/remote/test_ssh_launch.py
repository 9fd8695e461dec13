"""Remote launch, preflight, W&B guard and host keys against a real sshd on 127.0.0.1."""

import shlex
import stat
import threading
import time

import pytest
from trainwarden.events import types as t
from trainwarden.remote.control import SshController
from trainwarden.remote.errors import HostKeyRejected, PreflightFailed, SshError, SshTimeout, WandbGuardRefused
from trainwarden.remote.runscript import run_paths
from trainwarden.remote.stop import StopTarget

from tests.helpers import events_of, wait_for
from tests.remote.conftest import experiment, launcher
from tests.sshd import keygen

pytestmark = [pytest.mark.redis, pytest.mark.tmux, pytest.mark.ssh]


def test_commands_run_over_ssh(pool, gpu_server):
    done = pool.run(gpu_server.server, "echo hello && echo oops >&2; exit 4")
    assert (done.exit_status, done.stdout, done.stderr) == (4, "hello\n", "oops\n")


def test_closing_the_pool_answers_a_waiting_call_at_once(pool, gpu_server):
    """A bot or worker shutting down closes the pool: a call still waiting on it (a /launch thread) must fail
    then, not wait out its timeout against a loop that no longer runs (it outlived tests and shutdowns)."""
    raised: list[BaseException] = []

    def call() -> None:
        try:
            pool.run(gpu_server.server, "sleep 30", timeout=30)
        except BaseException as exc:  # the test inspects it
            raised.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(1.0)  # the command is running on the server
    started = time.monotonic()
    pool.close()
    caller.join(timeout=15)
    assert not caller.is_alive() and time.monotonic() - started < 12
    assert len(raised) == 1 and isinstance(raised[0], SshError) and not isinstance(raised[0], SshTimeout)
    assert "closed" in str(raised[0])


def test_unknown_host_key_is_refused(pool, gpu_server, tmp_path):
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    from dataclasses import replace

    with pytest.raises(HostKeyRejected, match=r"not trusted by .*ssh-keyscan"):
        pool.run(replace(gpu_server.server, known_hosts=empty), "true")


def test_changed_host_key_is_refused(pool, gpu_server, tmp_path):
    other = keygen(tmp_path / "other_host_key")
    wrong = tmp_path / "known_hosts_wrong"
    wrong.write_text(f"[127.0.0.1]:{gpu_server.server.port} {other.with_suffix('.pub').read_text()}")
    from dataclasses import replace

    with pytest.raises(HostKeyRejected):
        pool.run(replace(gpu_server.server, known_hosts=wrong), "true")


def test_preflight_passes_and_is_recorded(pool, store, gpu_server):
    results = launcher(pool, store, gpu_server, experiment()).preflight(experiment(), [0])
    assert [(r.name, r.ok) for r in results] == [
        ("wandb_guard", True), ("code_dir", True), ("python_env", True), ("torch_gpus", True), ("gpus_free", True),
        ("wandb_login", True), ("disk", True),
    ]  # fmt: skip
    assert [e.data["check"] for e in events_of(store, "exp01", t.PREFLIGHT)] == [r.name for r in results]


@pytest.mark.parametrize(
    ("setup", "check", "detail"),
    [
        ("missing_code_dir", "code_dir", "nope does not exist on gpu1"),
        ("one_gpu", "torch_gpus", "torch sees 1 GPU(s), GPU ids [1] need 2"),
        ("busy_gpu", "gpus_free", "busy: GPU 1 (pid 4242 python)"),
        ("no_nvidia_smi", "gpus_free", "not found"),
        ("bad_wandb_key", "wandb_login", "API key not configured"),
        ("no_disk", "disk", "GB required"),
    ],
)
def test_each_failing_check_refuses_the_launch(pool, store, gpu_server, setup, check, detail):
    from dataclasses import replace

    key = "good-key-0123456789"
    exp = experiment(gpu_ids=(1,), gpus=1)
    if setup == "missing_code_dir":
        exp = experiment(gpu_ids=(1,), gpus=1, code_dir=str(gpu_server.root / "nope"))
    elif setup == "one_gpu":
        gpu_server.set_gpu_count(1)
    elif setup == "busy_gpu":
        gpu_server.set_busy("GPU-bbbb, 4242, python")
    elif setup == "no_nvidia_smi":
        (gpu_server.venv / "bin" / "nvidia-smi").unlink()
    elif setup == "bad_wandb_key":
        key = "wrong"
    elif setup == "no_disk":
        gpu_server.server = replace(gpu_server.server, min_free_gb=1e9)
    tw = launcher(pool, store, gpu_server, exp, key=key)
    with pytest.raises(PreflightFailed) as info:
        tw.launch("exp01")
    assert check in str(info.value) and detail in str(info.value)
    (refused,) = events_of(store, "exp01", t.LAUNCH_REFUSED)
    assert refused.data["check"] == check
    assert "fix:" in refused.data["reason"]
    assert events_of(store, "exp01", t.RUN_LAUNCHED) == []
    assert not SshController(shell=pool, servers={"gpu1": gpu_server.server}).is_running(
        StopTarget(run="exp01", host="gpu1", server="gpu1", session="train-exp01",
                   tmux_socket=gpu_server.server.tmux_socket))  # fmt: skip


def test_wandb_guard_refuses_offline_runs(pool, store, gpu_server):
    for exp in (
        experiment(env={"WANDB_MODE": "offline"}),
        experiment(command=("env", "WANDB_MODE=disabled", "python")),
    ):
        with pytest.raises(WandbGuardRefused, match="offline/disabled"):
            launcher(pool, store, gpu_server, exp).launch("exp01")
    refusals = events_of(store, "exp01", t.LAUNCH_REFUSED)
    assert [r.data["check"] for r in refusals] == ["wandb_guard", "wandb_guard"]
    assert "allow_offline_wandb" in refusals[0].data["reason"]
    assert events_of(store, "exp01", t.PREFLIGHT) == []  # refused before touching the server
    assert not (gpu_server.root / "work" / ".trainwarden").exists()


def test_offline_allowed_when_the_experiment_opts_out(pool, store, gpu_server):
    exp = experiment(env={"WANDB_MODE": "offline"}, allow_offline_wandb=True)
    launcher(pool, store, gpu_server, exp).launch("exp01")
    assert "wandb_login" not in [e.data["check"] for e in events_of(store, "exp01", t.PREFLIGHT)]


def test_launch_runs_in_tmux_with_quoted_values_and_secrets_in_a_0600_file(pool, store, gpu_server):
    hostile = ("$(touch pwned1)", "; touch pwned2", "`touch pwned3`", "a'b\"c")
    exp = experiment(command=("python", "train.py", *hostile), gpu_ids=(1,),
                     env={"ODD_VALUE": "x; touch pwned4 $(id)", "HF_TOKEN": "hf-secret-value"},
                     params={"lr": "3e-4"})  # fmt: skip
    launched = launcher(pool, store, gpu_server, exp).launch("exp01")
    paths = run_paths(gpu_server.server, "exp01")
    log = gpu_server.root / "work" / ".trainwarden" / "runs" / "exp01" / "train.log"
    wait_for(lambda: log.exists() and "step=3" in log.read_text(), what="the run's first steps")
    text = log.read_text()
    assert f"argv {list(hostile)!r} gpus 1" in text
    assert "env x; touch pwned4 $(id) wandb exp01-" in text
    assert not list(gpu_server.root.rglob("pwned*"))
    env_file = gpu_server.root / "work" / ".trainwarden" / "runs" / "exp01" / "env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert "WANDB_API_KEY=good-key-0123456789" in env_file.read_text()
    assert "HF_TOKEN=hf-secret-value" in env_file.read_text()
    script = (gpu_server.root / "work" / ".trainwarden" / "runs" / "exp01" / "run.sh").read_text()
    assert "good-key" not in script and "hf-secret" not in script
    d = launched.data
    assert (d["server"], d["session"], d["log_path"], d["gpus"]) == ("gpu1", "train-exp01", paths.log, [1])
    assert isinstance(d["pid"], int)
    assert d["config"]["env"]["HF_TOKEN"] == "***"
    everything = str([e.data for e in events_of(store, "exp01")])
    assert "good-key" not in everything and "hf-secret" not in everything
    (started,) = events_of(store, "exp01", t.RUN_STARTED)
    assert started.data["pid"] == d["pid"]
    control = store.redis.xrange(store.keys.agent_control("gpu1"))
    assert control[-1][1][b"run"] == b"exp01" and control[-1][1][b"log"] == paths.log.encode()
    # the run's sidecar metrics file: given to the process, and to the agent to follow
    assert f"export TRAINWARDEN_METRICS={shlex.quote(paths.metrics)}\n" in script
    assert control[-1][1][b"metrics"] == paths.metrics.encode() == f"{paths.log}.metrics.jsonl".encode()


@pytest.mark.parametrize("way", ["ctrl-c", "stop_command", "kill after grace"])
def test_stop_both_ways_and_again(pool, store, gpu_server, way):
    env = {"IGNORE_SIGINT": "1"} if way == "kill after grace" else {}
    stop_command = ("touch", "STOP_FLAG") if way == "stop_command" else None
    exp = experiment(env=env, stop_command=stop_command, stop_grace_s=1.0)
    launched = launcher(pool, store, gpu_server, exp).launch("exp01")
    log = gpu_server.root / "work" / ".trainwarden" / "runs" / "exp01" / "train.log"
    wait_for(lambda: log.exists() and "step=2" in log.read_text(), what="the run to start")
    controller = SshController(shell=pool, servers={"gpu1": gpu_server.server})
    target = StopTarget.from_launch("exp01", launched.data, default_host="x")
    result = controller.stop(target)
    assert result.ok, result
    expected = {"ctrl-c": "ctrl-c", "stop_command": "stop_command", "kill after grace": "tmux kill-session"}[way]
    assert result.method == expected
    wait_for(lambda: not controller.is_running(target), what="the session to end")
    again = controller.stop(target)
    assert again.ok
    if way != "stop_command":
        assert "already ended" in again.detail


def test_metrics_of_a_remote_run_arrive(pool, store, gpu_server):
    from trainwarden.agent.control import ControlReader
    from trainwarden.agent.publisher import Publisher
    from trainwarden.agent.runner import Agent

    launcher(pool, store, gpu_server, experiment()).launch("exp01")
    # The host's agent learns the run from the control message the launcher wrote (here the
    # "server" shares our disk).
    control = ControlReader(store.redis, store.keys.agent_control("gpu1"))
    agent = Agent(publisher=Publisher(store), host="gpu1", control=control)

    def arrived() -> bool:
        agent.run(burst=True)
        return len(events_of(store, "exp01", t.METRIC)) >= 3

    wait_for(arrived, what="metric events from the remote run")
    steps = [e.data["step"] for e in events_of(store, "exp01", t.METRIC)]
    assert steps[:3] == [1, 2, 3]
