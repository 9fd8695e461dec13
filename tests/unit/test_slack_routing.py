"""`slack.routes`: the pure matching (a flat list: first match wins; a tree with `continue`) and its validation in the
settings file."""

import pytest
from trainwarden.bot.config import Route
from trainwarden.bot.routing import Destination, Labels, labels, route
from trainwarden.bot.stages import NotifyState, Pipeline
from trainwarden.core.errors import ConfigError
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event

from trainwarden.settings import parse_settings

ROUTES = (
    Route(run=("llm-*",), severity=("critical",), channel="C_ONCALL", mention=("U0ONCALL",)),
    Route(project=("vision", "det*"), host=("dgx-*",), channel="C_VISION"),
    Route(run=("llm-*",), channel="C_LLM"),
    Route(host=("ic2",), mention=("U0IC2",)),  # no channel: the default one, with a mention
)


@pytest.mark.parametrize(
    ("labels_", "expected"),
    [
        (Labels(run="llm-7b", severity="critical"), Destination("C_ONCALL", ("U0ONCALL",))),
        (Labels(run="llm-7b", severity="warning"), Destination("C_LLM")),  # the first route wants critical
        (Labels(run="resnet", project="detection", host="dgx-3"), Destination("C_VISION")),
        (Labels(run="resnet", project="vision", host="gpu1"), Destination("C_DEFAULT")),  # every matcher must hold
        (Labels(run="resnet", project=None, host="dgx-3"), Destination("C_DEFAULT")),  # no project: no match
        (Labels(run="resnet", host="ic2"), Destination("C_DEFAULT", ("U0IC2",))),
        (Labels(run="llm-7b", host="ic2", severity="critical"), Destination("C_ONCALL", ("U0ONCALL",))),
    ],
)
def test_first_matching_route_wins(labels_, expected):
    assert route(ROUTES, labels_, default="C_DEFAULT") == expected
    assert route((), labels_, default="C_DEFAULT") == Destination("C_DEFAULT")


def test_a_resolve_keeps_its_openings_severity_and_a_stop_is_critical():
    def ev(seq, event_type, **data):
        return make_event(
            event_type, run="r1", host="w", producer="eval/r1", seq=seq, data={"run_host": "gpu1", **data}
        )

    state, pipeline = NotifyState(), Pipeline(flap_threshold=3, flap_window_s=60.0)
    launched = ev(1, t.RUN_LAUNCHED, wandb={"project": "vision", "group": None, "run_name": None, "entity": None},
                  requested_by="U0ALICE")  # fmt: skip
    opened = ev(2, t.ANOMALY_OPENED, rule="a", reason="x", severity="critical")
    resolved, stop = ev(3, t.ANOMALY_RESOLVED, rule="a"), ev(4, t.DECISION, decision="STOP", rule="b", reason="y")
    kinds = []
    for event in (launched, opened, resolved, stop):
        notice, _ = pipeline.process(state, event)
        kinds.append(notice.kind if notice else None)
    assert kinds == [t.RUN_LAUNCHED, t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.STOP]
    assert state.project == "vision" and state.owners == ["U0ALICE"]
    assert labels(t.ANOMALY_RESOLVED, resolved, state) == Labels(run="r1", host="gpu1", project="vision",
                                                                 severity="critical", rule="a")  # fmt: skip
    assert labels(t.STOP, stop, state).severity == "critical"
    assert labels(t.RUN_LAUNCHED, launched, state).severity == "info"


def test_a_checkpoint_from_before_routing_keeps_its_thread():
    state = NotifyState.from_dict({"thread": "1.0", "headline": "h", "ended": True}, channel="C1")
    assert state.threads == {"C1": "1.0"} and state.headlines == {"C1": "h"} and state.ended


ROUTED = """\
slack:
  channel: C0DEFAULT
  routes:
    - {run: "llm-*", severity: [critical, warning], channel: C0ONCALL, mention: [U01AB]}
    - project: vision
      host: "dgx-*"
      channel: C0VISION
"""


def test_routes_are_read_in_order(tmp_path):
    cfg = parse_settings(ROUTED, tmp_path / "tw.yaml", env={}).slack
    assert cfg.routes == (
        Route(run=("llm-*",), severity=("critical", "warning"), channel="C0ONCALL", mention=("U01AB",)),
        Route(project=("vision",), host=("dgx-*",), channel="C0VISION"),
    )


def test_bad_routes_are_reported_with_file_line_and_column(tmp_path):
    text = """\
slack:
  channel: C0DEFAULT
  routes:
    - {run: "llm-*", severity: fatal, channel: C1}
    - {host: gpu1, mention: [bob]}
    - {run: x}
    - {hots: gpu1, channel: C2}
"""
    with pytest.raises(ConfigError) as err:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    assert err.value.problems == [  # type: ignore[attr-defined]
        f"{tmp_path}/tw.yaml:4:32: severity must be one of info, warning, critical or a list of them, got 'fatal'",
        f"{tmp_path}/tw.yaml:5:30: 'bob' in 'mention' is not a Slack user id like U0123ABCD",
        f"{tmp_path}/tw.yaml:6:7: a slack.routes entry needs a 'channel' or a 'mention' list",
        f"{tmp_path}/tw.yaml:7:8: unknown key 'hots' in a slack.routes entry; expected one of: channel, "
        "continue, host, mention, project, routes, rule, run, severity; did you mean 'host'?",
    ]


def test_a_runs_owners_are_who_launched_it_and_its_experiments_owner_and_a_resume_keeps_them():
    def launched(seq, **data):
        return make_event(t.RUN_LAUNCHED, run="r1", host="w", producer="launch/r1", seq=seq, data=data)

    state, pipeline = NotifyState(), Pipeline(flap_threshold=3, flap_window_s=60.0)
    pipeline.process(state, launched(1, requested_by="U0ALICE", owner="U0BOB"))
    assert state.owners == ["U0ALICE", "U0BOB"]
    pipeline.process(state, launched(2, attempt=2, resume=True, owner=None))  # an automatic resume
    assert state.owners == ["U0ALICE", "U0BOB"]
    pipeline.process(state, launched(3, owner="U0CAROL"))  # launched again, from the CLI
    assert state.owners == ["U0CAROL"]


TREE = """\
slack:
  channel: C0DEFAULT
  routes:
    - {severity: critical, channel: C0ONCALL, continue: true}
    - run: "llm-*"
      channel: C0LLM
      routes:
        - {rule: "gpu_*", channel: C0GPU}
"""


def test_a_route_tree_is_read_with_continue_and_children(tmp_path):
    cfg = parse_settings(TREE, tmp_path / "tw.yaml", env={}).slack
    assert cfg.routes == (
        Route(severity=("critical",), channel="C0ONCALL", continue_=True),
        Route(run=("llm-*",), channel="C0LLM", routes=(Route(rule=("gpu_*",), channel="C0GPU"),)),
    )


def test_bad_nested_routes_are_reported_where_they_are(tmp_path):
    text = """\
slack:
  channel: C0DEFAULT
  routes:
    - run: "llm-*"
      continue: maybe
      routes:
        - {rule: "gpu_*", chanel: C0GPU}
"""
    with pytest.raises(ConfigError) as err:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    assert err.value.problems == [  # type: ignore[attr-defined]
        f"{tmp_path}/tw.yaml:5:17: 'continue' must be true or false, got 'maybe'",
        f"{tmp_path}/tw.yaml:7:11: a slack.routes entry needs a 'channel' or a 'mention' list",
        f"{tmp_path}/tw.yaml:7:27: unknown key 'chanel' in a slack.routes entry; expected one of: channel, continue, "
        "host, mention, project, routes, rule, run, severity; did you mean 'channel'?",
    ]
