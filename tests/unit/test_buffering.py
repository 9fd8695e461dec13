"""Which processes `watch --pid` warns of: Python block-buffering its print into a pipe or a file."""

import pytest
from trainwarden.agent.buffering import Buffered, judge, unbuffered_flag, warning
from trainwarden.remote.wrapper import launch_env


@pytest.mark.parametrize("argv, expected", [
    (["python", "-u", "train.py"], True),
    (["python3", "-Bu", "train.py"], True),
    (["python", "-X", "dev", "-u", "train.py"], True),
    (["python", "train.py", "-u"], False),  # the script's own -u
    (["python", "-m", "trainer", "-u"], False),  # the module's
    (["python", "-c", "print(1)", "-u"], False),
    (["python", "-Xdev", "train.py"], False),
    (["python", "--", "train.py"], False),
])  # fmt: skip
def test_the_interpreters_own_u_flag(argv, expected):
    assert unbuffered_flag(argv) is expected


@pytest.mark.parametrize("argv, environ, stdout, expected", [
    (["python3.11", "train.py"], {}, "pipe:[123]", "a pipe"),
    (["/venv/bin/python", "train.py"], {}, "/logs/run.log", "file /logs/run.log"),
    (["python", "train.py"], {"PYTHONUNBUFFERED": "1"}, "pipe:[1]", None),
    (["python", "train.py"], {"PYTHONUNBUFFERED": ""}, "pipe:[1]", "a pipe"),  # empty: Python buffers
    (["python", "-u", "train.py"], {}, "pipe:[1]", None),
    (["python", "train.py"], {}, "/dev/pts/3", None),  # a terminal: flushed by line
    (["python", "train.py"], {}, "/dev/null", None),
    (["bash", "train.sh"], {}, "pipe:[1]", None),  # not Python: its children are judged on their own
    (["python-config"], {}, "pipe:[1]", None),
])  # fmt: skip
def test_judge(argv, environ, stdout, expected):
    assert judge(argv, environ, stdout) == expected


def test_the_warning_names_every_fix():
    said = warning(Buffered(pid=42, command="python train.py", stdout="a pipe"))
    assert said.startswith("warning: pid 42 (python train.py) is Python writing to a pipe without PYTHONUNBUFFERED")
    assert "`python -u`" in said and "PYTHONUNBUFFERED=1" in said and "flush=True" in said


def test_launch_env_defaults_and_the_runs_own_choice():
    assert launch_env({}) == {"PYTHONUNBUFFERED": "1"}
    assert launch_env({"SEED": "1"}) == {"PYTHONUNBUFFERED": "1", "SEED": "1"}
    assert launch_env({"PYTHONUNBUFFERED": ""}) == {"PYTHONUNBUFFERED": ""}
