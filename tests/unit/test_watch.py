"""Control-stream messages and the pure parts of process health."""

import pytest
from trainwarden.agent.errors import ControlMessageError
from trainwarden.agent.health import read_exit_code, wandb_guard
from trainwarden.agent.procfs import PAGE_SIZE, descendants, parse_environ, parse_stat
from trainwarden.agent.watch import RunWatch, parse_control


def fields(**kw):
    return {k.encode(): str(v).encode() for k, v in kw.items()}


def test_a_watch_message_from_a_remote_launch():
    # the fields the SSH launcher writes, with empty strings for what it does not know
    msg = parse_control(fields(op="watch", run="exp01", log="/w/.trainwarden/runs/exp01/train.log",
                               exit_file="/w/.trainwarden/runs/exp01/train.log.exit", session="train-exp01",
                               tmux_socket="", pid="4242", gpus="0,1", launch="launch/gpu1:1796234260123456",
                               launched_at="1796234260.1"))  # fmt: skip
    w = msg.watch
    assert w is not None and (w.run, w.pid, w.tmux_socket, w.gpus) == ("exp01", 4242, None, (0, 1))
    assert w.launch_seq == 1796234260123456 and w.launched_at == 1796234260.1
    assert RunWatch.from_dict(w.to_dict()) == w  # survives the state file


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"op": "start", "run": "a", "log": "/x"}, "op must be 'watch', 'unwatch', 'stop' or 'dump'"),
        ({"op": "stop", "run": "a", "request": "cli/h:1"}, "needs 'request' and a 'reply_as'"),
        ({"op": "watch", "run": "a", "log": "/x", "match": "train(.py"}, "is not a regular expression"),
        ({"op": "watch", "run": "a", "log": "/x", "stop_command": "kill 1"}, "must be a JSON list"),
        ({"op": "watch", "run": "a"}, "needs 'log'"),
        ({"op": "watch", "run": "a", "log": "rel.log"}, "must be absolute"),
        ({"op": "watch", "run": "a b", "log": "/x"}, "invalid run name"),
        ({"op": "watch", "run": "a", "log": "/x", "pid": "abc"}, "invalid watch"),
        ({"op": "watch", "run": "a", "log": "/x", "colour": "red"}, "unknown watch fields ['colour']"),
    ],
)
def test_bad_messages_say_what_is_wrong(kw, message):
    with pytest.raises(ControlMessageError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_control(fields(**kw))


def test_a_watch_that_says_how_to_stop_and_a_stop_order():
    msg = parse_control(fields(op="watch", run="exp01", log="/data/exp01.log", match=r"train\.py --name exp01",
                               stop_command='["touch", "/data/STOP"]', stop_grace_s="2.5"))  # fmt: skip
    w = msg.watch
    assert w is not None and w.stoppable and (w.match, w.stop_command, w.stop_grace_s) == (
        r"train\.py --name exp01", ("touch", "/data/STOP"), 2.5)  # fmt: skip
    assert RunWatch.from_dict(w.to_dict()) == w
    assert not RunWatch(run="x", log=w.log).stoppable
    order = parse_control(fields(op="stop", run="exp01", request="cli/h:17", reply_as="act/exp01/17-0", reason="lr"))
    assert order.stop is not None and (order.stop.request, order.stop.reply_as, order.stop.reason, order.stop.by) == (
        "cli/h:17", "act/exp01/17-0", "lr", None)  # fmt: skip


def test_unwatch():
    msg = parse_control(fields(op="unwatch", run="exp01"))
    assert (msg.op, msg.run, msg.watch) == ("unwatch", "exp01", None)


def test_stat_with_a_hostile_command_name():
    text = "4242 (py (thon) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 3 0 987654 1000 2560 0 0"
    stat = parse_stat(text)
    assert (stat.pid, stat.comm, stat.ppid, stat.cpu_ticks, stat.start_ticks) == (4242, "py (thon) x", 1, 200, 987654)
    assert stat.rss_bytes == 2560 * PAGE_SIZE


def test_descendants():
    procs = {p.pid: p for p in [parse_stat(f"{pid} (x) S {ppid} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0")
                                for pid, ppid in [(1, 0), (10, 1), (11, 10), (12, 11), (20, 1)]]}  # fmt: skip
    assert sorted(descendants(10, procs)) == [10, 11, 12]
    assert descendants(99, procs) == []


@pytest.mark.parametrize(
    ("env", "found"),
    [
        ({"WANDB_MODE": "offline"}, ("offline", "WANDB_MODE=offline")),
        ({"WANDB_MODE": "Disabled"}, ("disabled", "WANDB_MODE=disabled")),
        ({"WANDB_DISABLED": "true"}, ("disabled", "WANDB_DISABLED=true")),
        ({"WANDB_MODE": "online"}, None),
        ({}, None),
    ],
)
def test_wandb_guard(env, found):
    assert wandb_guard(env) == found
    assert wandb_guard(parse_environ(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))) == found


def test_exit_file_written_halfway_or_before_the_launch_is_not_read(tmp_path):
    path = tmp_path / "train.log.exit"
    assert read_exit_code(path) is None
    path.write_text("")
    assert read_exit_code(path) is None
    path.write_text("137\n")
    assert read_exit_code(path)[0] == 137
    assert read_exit_code(path, not_before=path.stat().st_mtime + 60) is None


def test_a_launch_says_its_experiment_allows_offline_wandb():
    msg = parse_control(fields(op="watch", run="exp01", log="/w/train.log", wandb="1", allow_offline_wandb="1"))
    assert msg.watch is not None and msg.watch.allow_offline_wandb and msg.watch.wandb
    plain = parse_control(fields(op="watch", run="exp01", log="/w/train.log", wandb="", allow_offline_wandb=""))
    assert plain.watch is not None and not plain.watch.allow_offline_wandb and plain.watch.wandb is None
    assert RunWatch.from_dict(msg.watch.to_dict()) == msg.watch  # kept across an agent restart


def test_the_guard_finds_an_offline_process_unless_its_experiment_allows_it(tmp_path):
    import os
    import subprocess

    from trainwarden.agent import procfs
    from trainwarden.agent.health import ProcessHealth

    # none of this process's WANDB_* (wandb.init in an earlier test sets WANDB_SERVICE in os.environ)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    proc = subprocess.Popen(["sleep", "30"], env={**clean, "WANDB_MODE": "offline", "WANDB_PROJECT": "p"})
    try:
        found = {}
        for allow in (False, True):
            health = ProcessHealth(RunWatch(run="r", log=tmp_path / "l", pid=proc.pid, allow_offline_wandb=allow))
            procs = procfs.snapshot()
            health.sample(procs, 1.0)
            found[allow] = health.guard(procs)
            assert health.wandb_env == ["WANDB_MODE", "WANDB_PROJECT"]  # it still uses W&B (offline)
        assert found[False] is not None and found[False].variable == "WANDB_MODE=offline"
        assert found[True] is None
    finally:
        proc.kill()
        proc.wait()
