"""What a resume says: RESUMED with attempt, checkpoint and cause; NOT RESUMED with reason and fix; the
worker's start-up warning when resumes would lack a W&B key. Pure functions, no I/O."""

from trainwarden.bot.messages import notification_text
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import fold
from trainwarden.ops.render import describe, state_lines
from trainwarden.remote.fleet import Experiment
from trainwarden.workers.actions import WANDB_KEY_FIX, failed_by, resume_key_missing


def launched(**data):
    base = {"server": "gpu1", "attempt": 2, "resume": True, "max_restarts": 2, "checkpoint": "/ck/epoch_9.pt"}
    return make_event(t.RUN_LAUNCHED, run="exp", host="ctl", producer="launch/ctl", seq=2, data={**base, **data})


def test_resumed_names_attempt_checkpoint_and_signal():
    text = notification_text(launched(resumed_after={"failure": "f1", "exit_code": 129, "rule": None}))
    assert text == ("RESUMED exp@gpu1 (attempt 2 of 3) from epoch_9.pt after the training process was killed by "
                    "signal 1 (SIGHUP), exit code 129.")  # fmt: skip


def test_resumed_names_the_rule_and_the_fault_line_that_failed_it():
    event = launched(resumed_after={"failure": "f1", "exit_code": 1, "rule": "cuda-oom"})
    text = notification_text(event, fault="CUDA out of memory")
    assert text is not None and text.endswith("exited with code 1 (rule cuda-oom; CUDA out of memory).")


def test_a_fresh_launch_or_a_resume_by_hand_is_no_resumed_message():
    assert notification_text(launched(attempt=1, resume=False, checkpoint=None)) is None
    assert notification_text(launched(attempt=1)) is None  # `launch --resume` from the CLI: not the workers'


def test_not_resumed_says_reason_and_fix():
    skipped = make_event(t.RESUME_SKIPPED, run="exp1", host="worker", producer="act/exp1/1-0", seq=1,
                         data={"reason": "preflight failed: wandb_login: No API key configured", "failure": "f",
                               "fix": WANDB_KEY_FIX, "attempts": 1})  # fmt: skip
    assert notification_text(skipped) == (
        "NOT RESUMED exp1 after attempt 1: preflight failed: wandb_login: No API key configured. "
        "Fix: export WANDB_API_KEY in the environment of `trainwarden up` (the worker launches resumes)."
    )


def test_failed_by_skips_what_the_failure_itself_opened():
    opened = {
        "run-failed": {"rule": "run-failed", "severity": "critical", "trigger": "fail", "ts": 3.0},
        "cuda-oom": {"rule": "cuda-oom", "severity": "critical", "trigger": "line", "ts": 2.0},
        "loss-spike": {"rule": "loss-spike", "severity": "warning", "trigger": "m", "ts": 2.5},
    }
    assert failed_by(opened, "fail") == "cuda-oom"
    assert failed_by({"run-failed": opened["run-failed"]}, "fail") is None


def test_worker_warns_when_resumes_would_have_no_wandb_key():
    resumable = Experiment(name="exp1", server="gpu1", command=("python", "t.py"), resume_command=("python", "t.py"))
    offline = Experiment(name="exp2", server="gpu1", command=("x",), resume_command=("x",), allow_offline_wandb=True)
    plain = Experiment(name="exp3", server="gpu1", command=("x",))
    warning = resume_key_missing([resumable, offline, plain], {})
    assert warning is not None and "resumes of exp1 will be refused" in warning and WANDB_KEY_FIX in warning
    assert resume_key_missing([resumable], {"WANDB_API_KEY": "k"}) is None
    assert resume_key_missing([offline, plain], {}) is None


def test_replay_says_a_resume_and_a_refusal():
    line = describe(launched(session="train-exp", host="gpu1", log_path="/l",
                             resumed_after={"failure": "f1", "exit_code": 137, "rule": None}))  # fmt: skip
    assert line == "session train-exp on gpu1, log /l, attempt 2, resumed from /ck/epoch_9.pt after exit code 137"
    skipped = make_event(
        t.RESUME_SKIPPED,
        run="exp1",
        host="worker",
        producer="act/exp1/1-0",
        seq=1,
        data={"reason": "max_restarts (1) reached after 2 attempts", "failure": "f", "fix": "look"},
    )
    assert describe(skipped) == "not resumed: max_restarts (1) reached after 2 attempts; fix: look"


def test_replay_state_says_the_current_launch_is_a_resume():
    state = fold([launched(session="train-exp", log_path="/l", resumed_after={"failure": "f", "exit_code": 137,
                                                                              "rule": "cuda-oom"})])  # fmt: skip
    assert "launch:     tmux session train-exp, log /l, attempt 2, resumed from /ck/epoch_9.pt after exit code 137 " \
           "(cuda-oom)" in state_lines(state)  # fmt: skip
