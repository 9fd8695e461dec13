"""A Ctrl-C held over a step that must not be cut in two (core/signals.py), and what launch says then."""

import os
import signal

import pytest
from trainwarden.core.signals import sigint_deferred
from trainwarden.ops.launch_messages import interrupted


@pytest.fixture(autouse=True)
def python_default_sigint():
    """Python's own Ctrl-C handler while each test runs: a command an earlier test ran in this process
    (`stop_on_signals`) may have left its handler, which the assertions below would take for a leak."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_in_the_block_lands_after_it():
    done = []
    with pytest.raises(KeyboardInterrupt), sigint_deferred(lambda: done.append("said why")):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # a second one is held too, and said once
        done.append("the step finished")
    assert done == ["said why", "the step finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_an_error_of_the_block_goes_on_as_it_is():
    with pytest.raises(ValueError, match="tmux refused"), sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        raise ValueError("tmux refused")  # nothing started: its error says so, not "interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_ctrl_c_nothing_happens():
    with sigint_deferred():
        pass


def test_what_launch_says():
    assert (
        interrupted("exp01", started=False) == "interrupted: exp01 was not started (nothing was recorded, nothing runs)"
    )
    said = interrupted("exp01", started=True, log="gpu1:/runs/exp01.log")
    assert said.startswith("interrupted: exp01 was started and is being followed; ")
    assert "log: gpu1:/runs/exp01.log" in said and "`trainwarden stop exp01` to stop it" in said
