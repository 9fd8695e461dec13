"""The one spelling of a run's tmux server, and what a launch reads back from tmux (pure)."""

import pytest
from trainwarden.core.tmux import tmux_argv, tmux_env
from trainwarden.remote.local_launch import STARTED_FORMAT, started


def test_a_path_is_a_socket_a_name_a_socket_name_none_the_default_server():
    assert tmux_argv("/tmp/tmux-1000/default", "ls") == ["tmux", "-S", "/tmp/tmux-1000/default", "ls"]
    assert tmux_argv("trainwarden", "ls") == ["tmux", "-L", "trainwarden", "ls"]
    assert tmux_argv(None, "ls") == tmux_argv("", "ls") == ["tmux", "ls"]


def test_an_inherited_tmux_never_picks_the_server():
    assert tmux_env({"TMUX": "/tmp/tmux-0/other,42,0", "PATH": "/bin"}) == {"PATH": "/bin"}


@pytest.mark.parametrize(("answer", "asked", "expected"), [
    ("/tmp/tmux-0/default 4242\n", None, ("/tmp/tmux-0/default", 4242)),
    ("/tmp/my dir/sock 7\n", "x", ("/tmp/my dir/sock", 7)),  # a path with a space
    ("", "mysock", ("mysock", None)),  # an old tmux that prints nothing: the socket asked, no pid
    ("garbage", None, (None, None)),
])  # fmt: skip
def test_the_launch_reads_the_server_and_the_pane_pid(answer, asked, expected):
    assert STARTED_FORMAT == "#{socket_path} #{pane_pid}"
    assert started(answer, asked) == expected
