import pytest
from trainwarden.bot.messages import notification_text
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from tests.layout import REPO

REAL = REPO / "tests" / "data" / "real"


def ev(event_type, **data):
    return make_event(
        event_type,
        run="exp01-baseline",
        host="worker",
        producer="eval/exp01-baseline",
        seq=1,
        data={"run_host": "ic2", **data},
    )


def test_stop_fits_one_lock_screen_line():
    text = notification_text(ev(t.DECISION, decision="STOP", rule="loss-nonfinite", reason="loss=nan at step 1200"))
    assert text == "STOP exp01-baseline@ic2: loss=nan at step 1200 (loss-nonfinite)"


def test_anomaly_carries_remedy():
    text = notification_text(
        ev(
            t.ANOMALY_OPENED,
            rule="loss-nonfinite",
            reason="loss=nan",
            severity="critical",
            remedy="lower the learning rate",
        )
    )
    assert text.startswith("ANOMALY exp01-baseline@ic2: loss=nan (loss-nonfinite, critical).")
    assert "lower the learning rate" in text


def test_stop_done_names_the_evidence():
    text = notification_text(ev(t.STOP_DONE, detail="killed tmux session train-x"), evidence_path="/e/x")
    assert text == "STOPPED exp01-baseline@ic2: killed tmux session train-x. Evidence: /e/x"


def test_stop_failed_says_how_to_stop_by_hand():
    text = notification_text(ev(t.STOP_FAILED, error="tmux refused", hint="tmux kill-session -t train-x"))
    assert "Stop it by hand: tmux kill-session -t train-x" in text


def test_stop_failed_without_a_command_says_by_hand_once():
    text = notification_text(ev(t.STOP_FAILED, error="no trainwarden agent runs on ic2"))
    assert (
        text == "STOP FAILED exp01-baseline@ic2: no trainwarden agent runs on ic2. Stop the training process by hand."
    )


def test_a_persons_reason_is_in_the_stopped_message_a_policys_is_not_repeated():
    by_cli = notification_text(ev(t.STOP_DONE, detail="sent SIGINT to pid 7 (python)", reason="lr too high", by="cli"))
    assert by_cli == "STOPPED exp01-baseline@ic2: sent SIGINT to pid 7 (python). Reason: lr too high."
    by_policy = notification_text(ev(t.STOP_DONE, detail="sent SIGINT to pid 7 (python)", reason="loss=nan",
                                     by="policy"))  # fmt: skip
    assert by_policy == "STOPPED exp01-baseline@ic2: sent SIGINT to pid 7 (python)."


@pytest.mark.parametrize(
    ("event_type", "data"),
    [(t.DECISION, {"decision": "CONTINUE"}), (t.METRIC, {"loss": 1.0}), (t.EVIDENCE_BUILT, {"path": "/x"})],
)
def test_healthy_news_is_not_posted(event_type, data):
    assert notification_text(ev(event_type, **data)) is None


def test_secrets_never_reach_a_message():
    text = notification_text(ev(t.STOP_FAILED, error="auth failed for xoxb-1234567890-secret", hint="x"))
    assert "xoxb-1234567890" not in text


def test_a_rejected_policy_says_what_is_wrong_and_how_to_fix_it():
    problems = ["/etc/tw/policy.yaml:4:11: unknown rule kind 'spikes'", "x:5:1: y"]
    event = make_event(t.POLICY_REJECTED, run=t.SYSTEM_RUN, host="w1", producer="policy-rejected/abc", seq=1,
                       data={"source": "/etc/tw/policy.yaml", "kept": "15d20eb4", "problems": problems})  # fmt: skip
    text = notification_text(event)
    assert text.startswith("POLICY REJECTED: /etc/tw/policy.yaml has errors, still using policy 15d20eb4: ")
    assert "unknown rule kind 'spikes' (+1 more)" in text
    assert "trainwarden policy check FILE" in text


@pytest.mark.parametrize(
    ("code", "said"),
    [(3, "exited with code 3"), (255, "exited with code 255"), (130, "was killed by signal 2 (SIGINT), exit code 130"),
     (137, "was killed by signal 9 (SIGKILL), exit code 137"),
     (-15, "was killed by signal 15 (SIGTERM), exit code -15"),
     (None, "ended with an unknown exit code (it left none: killed, or its host went down)")],
)  # fmt: skip
def test_an_exit_code_reads_as_what_happened_never_none(code, said):
    text = notification_text(ev(t.RUN_FAILED, exit_code=code))
    assert text == f"FAILED exp01-baseline@ic2: the training process {said}."
    assert "None" not in text


def test_a_failure_without_a_fault_shows_the_logs_last_lines():
    # the real end of a Keras run's log (tests/data/real/MANIFEST.yaml has its provenance), and an injected secret
    lines = (REAL / "keras_tf1_fit_oom_traceback.log").read_text().splitlines()[-10:]
    tail = [*lines[:-1], lines[-1] + " xoxb-1234567890-secret", ""]
    text = notification_text(ev(t.RUN_FAILED, exit_code=1, log_tail=tail))
    assert text.startswith(
        "FAILED exp01-baseline@ic2: the training process exited with code 1. The log ends with:\n```"
    )
    shown = text.split("```")[1].strip("\n").splitlines()
    assert shown[:-1] == lines[-8:-1] and shown[-1].startswith(lines[-1])  # the last 8, the blank one dropped
    assert "secret" not in text
    assert "```" not in notification_text(ev(t.RUN_FAILED, exit_code=1, log_tail=[]))
