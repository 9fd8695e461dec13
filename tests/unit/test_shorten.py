"""Reasons cut to fit are cut between words and marked (`… (the kernel's…`), never mid-word (`its processes
have WAN`): one function, events/words.shorten, for every place that cuts a reason."""

import json

import pytest
from trainwarden.bot import limits, messages
from trainwarden.bot.blocks import notice_blocks
from trainwarden.bot.stages import NotifyState, select
from trainwarden.core.words import ELLIPSIS, shorten
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

# the stall rule's reason as a hung trainer produced it (agent/process.py, policies/default.yaml)
STALL = ("no training step for 2m after step 10 (steps came every 100ms; its budget is 2m); its processes use 0% of "
         "a core: hung, waiting on a lock or a condition (a futex) (the kernel's futex_do_wait)")  # fmt: skip
WANDB = "its processes have WANDB_PROJECT, WANDB_MODE in their environment"


def test_a_text_that_fits_is_unchanged():
    assert shorten(STALL, len(STALL)) == STALL
    assert shorten("", 5) == ""


@pytest.mark.parametrize("limit", range(20, len(STALL)))
def test_the_stall_reason_is_cut_between_words_at_every_limit(limit):
    cut = shorten(STALL, limit)
    assert len(cut) <= limit and cut.endswith(ELLIPSIS)
    kept = cut[: -len(ELLIPSIS)]
    assert STALL.startswith(kept)
    assert kept[-1].isalnum() or kept[-1] in ")'%", cut  # no dangling comma, colon or open paren
    assert not STALL[len(kept)].isalnum() and STALL[len(kept)] != "_", cut  # the next word was dropped whole


def test_the_reported_cut_keeps_whole_words():
    assert shorten(WANDB, 22) == "its processes have…"  # was "its processes have WAN"
    assert shorten(STALL, 120) == ("no training step for 2m after step 10 (steps came every 100ms; its budget is 2m); "
                                   "its processes use 0% of a core: hung…")  # fmt: skip


def test_one_long_token_is_cut_inside_rather_than_dropped():
    path = "/data/runs/" + "x" * 100 + "/train.log"
    cut = shorten(f"see {path}", 40)
    assert len(cut) == 40 and cut.startswith("see /data/runs/xxx") and cut.endswith(ELLIPSIS)


def test_the_stop_buttons_reason_ends_on_a_whole_word():
    """The anomaly's "Stop run" button carries the notice as the stop's reason (at most 200 characters): it was
    cut at 200 characters, mid-word (`(the kernel's fut`), and that stop reason is what the log and console keep."""
    opened = make_event(t.ANOMALY_OPENED, run="exp01", host="gpu1", producer="eval/exp01", seq=1,
                        data={"rule": "run-stalled", "severity": "warning", "reason": STALL})  # fmt: skip
    state = NotifyState()
    notice = select(state, opened)
    assert notice is not None and len(notice.text) > 200
    actions = next(b for b in notice_blocks(notice, state=state, trend=None, snooze_s=60) if b["type"] == "actions")
    reason = json.loads(actions["elements"][1]["value"])["reason"]
    assert reason.endswith("(a futex) (the kernel's…") and len(reason) <= 200, reason


def test_slacks_cuts_with_a_count_marker_end_on_a_whole_word_too():
    """Notices over Slack's 3,000 characters keep their `… [N more characters cut]` marker, after a whole word."""
    long = " ".join([STALL] * 30)
    for text in (limits.clip(long, limits.SECTION_TEXT), messages.masked_head(long, messages.NOTICE_MAX)):
        kept, marker = text.split(" … [")
        assert len(text) <= 3000 and long.startswith(kept) and len(kept) > 2000
        assert not long[len(kept)].isalnum() and long[len(kept)] != "_", kept[-30:]
        assert marker == f"{len(long) - len(kept)} more characters cut]"
