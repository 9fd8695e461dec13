"""Every message the bot builds, fitted by bot/limits.py, is one Slack accepts (checked against the
limits as tests/slack_api.py enforces them, written down separately from the code under test)."""

import json

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from trainwarden.bot import limits, message_parts, messages, replies
from trainwarden.bot.blocks import notice_blocks, stop_prompt, text_blocks
from trainwarden.bot.stages import NotifyState, select
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from tests.slack_api import slack_violations

# Short, long and very long texts, cheap to generate: a random head and a long run of one character.
texts = st.one_of(
    st.text(max_size=40),
    st.builds(lambda head, c, n: head + c * n, st.text(max_size=20), st.characters(blacklist_categories=("Cs",)),
              st.integers(0, 60_000)),
)  # fmt: skip
runs = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", fullmatch=True)

EVENTS = {
    t.ANOMALY_OPENED: lambda s: {"rule": s, "severity": s, "reason": s, "remedy": s, "values": {"loss": 1.0}},
    t.ANOMALY_RESOLVED: lambda s: {"rule": s},
    t.DECISION: lambda s: {"decision": "STOP", "rule": s, "reason": s, "remedy": s},
    "guard": lambda s: {"decision": "STOP", "rule": s, "reason": s, "confirm_s": 60},
    "wait": lambda s: {"decision": "WAIT", "rule": s, "reason": s},
    t.STOP_DONE: lambda s: {"detail": s},
    t.STOP_FAILED: lambda s: {"error": s, "hint": s},
    t.STOP_CANCELLED: lambda s: {"user": s, "rule": s, "until": 0.0},
    t.RUN_FAILED: lambda s: {"exit_code": s},
    t.POLICY_REJECTED: lambda s: {"source": s, "kept": s, "problems": [s, s]},
    t.RUN_LAUNCHED: lambda s: {"requested_by": s, "server": s, "session": s, "log_path": s, "gpus": [0, 1]},
    t.LAUNCH_FAILED: lambda s: {"server": s, "user": s, "error": s},
    t.WATCHDOG_STALLED: lambda s: {"detail": s},
    t.WATCHDOG_RECOVERED: lambda s: {"detail": s, "stalled_s": 5},
}


def accepted(text, blocks):
    fitted_text, fitted = limits.fit_message(text, blocks)
    assert slack_violations({"text": fitted_text, "blocks": json.loads(json.dumps(fitted))}) == []
    return fitted_text, fitted


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(EVENTS)), run=runs, text=texts, extra=texts)
def test_every_notification_fitted_is_accepted(kind, run, text, extra):
    event_type = t.DECISION if kind in ("guard", "wait") else kind
    event = make_event(event_type, run=run, host="h", producer="p", seq=1, data=EVENTS[kind](text))
    state = NotifyState(wandb_url=extra, evidence=extra)
    notice = select(state, event)
    assume(notice is not None)  # a launch by nobody (requested_by empty) is not news
    blocks = notice_blocks(notice, state=state, trend=(extra, [1.0] * 30), snooze_s=3600)
    fitted_text, fitted = accepted(notice.text, blocks)
    assert fitted_text.startswith(notice.text[:1000])  # what matters comes first and is kept
    for block in fitted:
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            value = json.loads(element["value"])  # still the JSON the handlers read back
            assert value["run"] == run
    for text_ in (
        message_parts.thread_parent(notice.text, [extra] * 50),
        message_parts.closed(notice.text, extra),
    ):
        accepted(text_, text_blocks(text_))


@settings(max_examples=50, deadline=None)
@given(run=runs, reason=texts)
def test_command_replies_fitted_are_accepted(run, reason):
    accepted(replies.stop_confirm(run, reason), stop_prompt(run, reason))


def test_a_message_within_the_limits_is_left_as_it_is():
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3000}}]
    assert limits.fit_message("y" * 40_000, blocks) == ("y" * 40_000, blocks)


def test_a_cut_says_how_much_was_cut_and_too_many_blocks_say_how_many_were_left_out():
    text = limits.clip("a" * 3200, 3000)
    kept = text.index(" …")
    assert len(text) <= 3000 and text == "a" * kept + message_parts.truncated(3200 - kept)
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": str(i)}} for i in range(60)]
    _, fitted = accepted("x", blocks)
    assert len(fitted) == 50 and fitted[-1]["text"]["text"] == message_parts.blocks_left_out(11)


def test_a_long_notice_is_masked_and_cut_quickly_and_no_secret_is_cut_in_half():
    token = "xoxb-" + "1234567890" * 4
    for at in range(messages.NOTICE_MAX - 80, messages.NOTICE_MAX, 3):  # the token across the cut
        error = "e" * at + f" {token} " + "x" * 100_000
        event = make_event(t.LAUNCH_FAILED, run="r", host="h", producer="p", seq=1,
                           data={"server": "gpu1", "user": "U1", "error": error})  # fmt: skip
        text = messages.notification_text(event)
        assert text is not None and len(text) <= messages.NOTICE_MAX <= limits.SECTION_TEXT
        assert "xoxb-1" not in text and "more characters cut" in text
