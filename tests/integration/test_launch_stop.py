"""Local launch in real tmux and the local run controller."""

import subprocess
import sys

import pytest
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore
from trainwarden.remote.errors import LaunchError
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import LocalTmuxController, StopTarget, tmux_argv

from tests.conftest import REPO, cli_argv
from tests.helpers import events_of, wait_for
from trainwarden.tools.redis_server import RedisServer, free_port

pytestmark = [pytest.mark.redis, pytest.mark.tmux]

PRINT_ARGV = "import sys, time; print('argv', sys.argv[1:], flush=True); time.sleep(60)"


def spec(tmp_path, socket, *args, **kw):
    return LaunchSpec(
        run="exp01",
        command=(sys.executable, "-c", PRINT_ARGV, *args),
        workdir=tmp_path,
        log_path=tmp_path / "exp01.log",
        tmux_socket=socket,
        **kw,
    )


def target(event):
    return StopTarget.from_launch("exp01", event.data, default_host="h")


def test_launch_records_the_run_and_hostile_arguments_stay_literal(store, tmp_path, tmux_socket):
    hostile = ("$(touch pwned1)", "; touch pwned2", "`touch pwned3`", "a'b\"c", "--x=$HOME")
    event = launch_local(
        spec(tmp_path, tmux_socket, *hostile, env={"WANDB_API_KEY": "s3cretkey123"}), store=store, host="gpu1"
    )
    log = tmp_path / "exp01.log"
    wait_for(lambda: log.exists() and "argv" in log.read_text(), what="the run to print its argv")
    assert repr(list(hostile)) in log.read_text()
    assert not list(tmp_path.glob("pwned*"))
    assert LocalTmuxController().is_running(target(event))
    (launched,) = events_of(store, "exp01", t.RUN_LAUNCHED)
    assert launched.data["session"] == "train-exp01"
    assert launched.data["env"] == {"WANDB_API_KEY": "***"}
    assert "s3cretkey123" not in str(launched.data)


def test_stop_kills_the_session_and_a_second_stop_is_a_no_op(store, tmp_path, tmux_socket):
    event = launch_local(spec(tmp_path, tmux_socket), store=store, host="gpu1")
    controller = LocalTmuxController()
    first = controller.stop(target(event))
    assert first.ok and first.method == "ctrl-c", first
    assert not controller.is_running(target(event))
    second = controller.stop(target(event))
    assert second.ok and "already ended" in second.detail


def test_exit_code_is_kept_beside_the_log(store, tmp_path, tmux_socket):
    failing = LaunchSpec(
        run="exp02",
        command=(sys.executable, "-c", "import sys; sys.exit(3)"),
        workdir=tmp_path,
        log_path=tmp_path / "exp02.log",
        tmux_socket=tmux_socket,
    )
    launch_local(failing, store=store, host="gpu1")
    exit_file = tmp_path / "exp02.log.exit"
    assert wait_for(lambda: exit_file.exists() and exit_file.read_text().strip(), what="exit file") == "3"


def test_stop_command_is_used_when_the_run_has_one(tmp_path):
    marker = tmp_path / "stopped"
    ok = LocalTmuxController().stop(
        StopTarget(run="x", host="h", stop_command=(sys.executable, "-c", f"open({str(marker)!r}, 'w')"))
    )
    assert ok.ok and ok.method == "stop_command"
    assert marker.exists()
    bad = LocalTmuxController().stop(StopTarget(run="x", host="h", stop_command=(sys.executable, "-c", "exit(3)")))
    assert not bad.ok and "exited 3" in bad.detail
    missing = LocalTmuxController().stop(StopTarget(run="x", host="h", stop_command=("/no/such/stopper",)))
    assert not missing.ok and "not found" in missing.detail


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"env": {"BAD NAME": "x"}}, "invalid environment variable name"), ({"command": ()}, "empty")],
)
def test_launch_refuses_bad_specs(store, tmp_path, tmux_socket, changes, message):
    args = {
        "run": "exp01",
        "command": ("true",),
        "workdir": tmp_path,
        "log_path": tmp_path / "x.log",
        "tmux_socket": tmux_socket,
        **changes,
    }
    with pytest.raises(LaunchError, match=message):
        launch_local(LaunchSpec(**args), store=store, host="gpu1")
    assert store.length("exp01") == 0


def test_launch_refuses_a_missing_workdir(store, tmp_path, tmux_socket):
    with pytest.raises(LaunchError, match="does not exist"):
        launch_local(spec(tmp_path / "nope", tmux_socket), store=store, host="gpu1")


def test_launch_of_a_session_that_exists_is_refused(store, tmp_path, tmux_socket):
    launch_local(spec(tmp_path, tmux_socket), store=store, host="gpu1")
    with pytest.raises(LaunchError, match="could not start session"):
        launch_local(spec(tmp_path, tmux_socket), store=store, host="gpu1")
    assert len(events_of(store, "exp01", t.RUN_LAUNCHED)) == 1


LAST_WORDS = """
import time
print("training", flush=True)
try:
    time.sleep(60)
except KeyboardInterrupt:
    time.sleep(0.2)
    print("interrupted: saved a last checkpoint", flush=True)
    raise
"""


def test_ctrl_c_is_recorded_as_130_with_the_trainers_last_words(store, tmp_path, tmux_socket):
    """The stop's Ctrl-C reaches the trainer; the wrapper waits for it and writes its exit status."""
    run = LaunchSpec(run="exp03", command=(sys.executable, "-c", LAST_WORDS), workdir=tmp_path,
                     log_path=tmp_path / "exp03.log", tmux_socket=tmux_socket)  # fmt: skip
    event = launch_local(run, store=store, host="gpu1")
    wait_for(lambda: run.log_path.exists() and "training" in run.log_path.read_text(), what="the run to start")
    stopped = LocalTmuxController().stop(StopTarget.from_launch("exp03", event.data, default_host="h"))
    assert stopped.ok and stopped.method == "ctrl-c", stopped
    assert (tmp_path / "exp03.log.exit").read_text().strip() == "130"
    assert "interrupted: saved a last checkpoint" in run.log_path.read_text()


def test_a_killed_session_is_recorded_as_killed_by_sighup(store, tmp_path, tmux_socket):
    """tmux kill-session hangs up on the wrapper only: it passes the signal on and records 128+1."""
    run = LaunchSpec(run="exp04", command=(sys.executable, "-c", PRINT_ARGV), workdir=tmp_path,
                     log_path=tmp_path / "exp04.log", tmux_socket=tmux_socket)  # fmt: skip
    event = launch_local(run, store=store, host="gpu1")
    wait_for(lambda: run.log_path.exists() and "argv" in run.log_path.read_text(), what="the run to start")
    subprocess.run(tmux_argv(tmux_socket, "kill-session", "-t", "=train-exp04"), check=True)
    exit_file = tmp_path / "exp04.log.exit"
    assert wait_for(lambda: exit_file.exists() and exit_file.read_text().strip(), what="exit file") == "129"
    assert not LocalTmuxController().is_running(target(event))


def launch_cli(settings, *args):
    return subprocess.run(cli_argv(settings, "launch", *args), capture_output=True, text=True, cwd=REPO,
                          check=False, timeout=60)  # fmt: skip


def no_session(socket):
    probe = subprocess.run(tmux_argv(socket, "has-session", "-t", "=train-exp01"), capture_output=True, check=False)
    return probe.returncode != 0


def test_readme_launch_takes_options_before_the_command_and_reports_a_command_that_fails_at_once(
    store, settings_file, tmp_path, tmux_socket
):
    """The README's example: options after the run name, the command after `--`. A command that fails at
    once makes launch exit 1 with its exit status and the log's tail, not "launched"."""
    log = tmp_path / "logs" / "exp01.log"
    failing = "import sys; print('FileNotFoundError: data/train.bin', flush=True); sys.exit(3)"
    proc = launch_cli(settings_file, "exp01", "--workdir", str(tmp_path), "--log", str(log),
                      "--tmux-socket", tmux_socket, "--", sys.executable, "-c", failing)  # fmt: skip
    assert proc.returncode == 1, proc
    assert "launched" not in proc.stdout
    assert "exp01 exited with code 3 within 1 s of launch; log: " in proc.stderr  # the same words as over SSH
    assert "  FileNotFoundError: data/train.bin" in proc.stderr  # the log's tail
    assert (tmp_path / "logs" / "exp01.log.exit").read_text().strip() == "3"
    assert [e.data["command"] for e in events_of(store, "exp01", t.RUN_LAUNCHED)] == [[sys.executable, "-c", failing]]

    # A run still going after --check-s is "launched"; its argv is exactly what follows the first `--`,
    # a second `--` and option-like words included; global options are taken after the subcommand too.
    proc = launch_cli(settings_file, "exp02", "--log-level", "WARNING", "--workdir", str(tmp_path), "--check-s",
                      "0.3", "--tmux-socket", tmux_socket, "--", sys.executable, "-c", PRINT_ARGV, "--",
                      "--workdir", "x")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("launched exp02 in tmux session train-exp02")
    log = tmp_path / "exp02.log"
    wait_for(lambda: log.exists() and "argv" in log.read_text(), what="the run to print its argv")
    assert "argv ['--', '--workdir', 'x']" in log.read_text()


def test_a_run_the_watchdog_stops_within_the_check_is_said_stopped_not_failed(store, settings_file, tmp_path,
                                                                              tmux_socket):  # fmt: skip
    """A NaN at step 3 is stopped (Ctrl-C: exit 130) before launch's check is over: launch names the stop
    and its rule, not "exited with code 130"."""
    ended_by_ctrl_c = "import time; time.sleep(1.5); raise SystemExit(130)"
    proc = subprocess.Popen(cli_argv(settings_file, "launch", "exp05", "--workdir", str(tmp_path), "--tmux-socket",
                                     tmux_socket, "--check-s", "20", "--", sys.executable, "-c", ended_by_ctrl_c),
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    wait_for(lambda: events_of(store, "exp05", t.RUN_LAUNCHED), what="run.launched")
    asked = make_event(t.STOP_REQUESTED, run="exp05", host="testhost", producer="act/exp05/1-0", seq=1,
                       data={"by": "policy", "rule": "loss-nonfinite", "reason": "loss=nan at step 3"})  # fmt: skip
    store.append_one(asked)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert "exp05 started, and was stopped at once: rule loss-nonfinite asked for it (loss=nan at step 3)" in err
    assert "exited with code" not in err and "launched" not in out


def test_launch_with_redis_down_starts_nothing(tmp_path, tmux_socket):
    settings = tmp_path / "tw.yaml"
    settings.write_text(f"redis_url: redis://127.0.0.1:{free_port()}/0\nhost: testhost\n")  # nothing listens there
    proc = launch_cli(settings, "exp01", "--workdir", str(tmp_path), "--tmux-socket", tmux_socket, "--",
                      sys.executable, "-c", PRINT_ARGV)  # fmt: skip
    assert proc.returncode == 1
    assert "Redis unreachable" in proc.stderr and "nothing was started" in proc.stderr
    assert no_session(tmux_socket)
    assert not (tmp_path / "exp01.log").exists()


def test_a_launch_that_cannot_be_recorded_is_stopped_again(tmp_path, tmux_socket):
    """Redis answers but refuses writes (no replica for min-replicas-to-write): the session that started is
    killed again, and the error says so."""
    with RedisServer(tmp_path / "redis", extra_args=["--min-replicas-to-write", "1"]) as server:
        refusing = EventStore(server.client(), keys=Keys())
        with pytest.raises(LaunchError, match=r"could not be recorded.*stopped it again") as raised:
            launch_local(spec(tmp_path, tmux_socket), store=refusing, host="gpu1")
    assert "NOREPLICAS" in str(raised.value)
    assert no_session(tmux_socket)
