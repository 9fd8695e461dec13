from pathlib import Path

import pytest
from trainwarden.core.errors import ConfigError

from trainwarden.settings import load_settings, parse_settings

GOOD = """\
redis_url: redis://127.0.0.1:7000/0
host: ic2
evidence_dir: ev
archive_dir: ../old-logs
agent:
  poll_interval_s: 0.1
  watch:
    - run: exp01
      log: logs/exp01.log
workers:
  reclaim_idle_s: 10
"""


def test_good_file(tmp_path):
    s = parse_settings(GOOD, tmp_path / "tw.yaml", env={})
    assert s.redis_url == "redis://127.0.0.1:7000/0"
    assert s.host == "ic2"
    assert s.evidence_dir == (tmp_path / "ev").resolve()
    assert s.archive_dir == (tmp_path.parent / "old-logs").resolve()  # relative to the settings file
    assert s.watches[0].run == "exp01"
    assert s.watches[0].log == tmp_path / "logs/exp01.log"
    assert s.reclaim_idle_s == 10.0


def test_agent_options_and_a_full_watch_entry(tmp_path):
    text = GOOD.replace("  watch:\n", "  gpu_interval_s: 1\n  nvml: false\n  spool_max_mb: 64\n  watch:\n").replace(
        "workers:",
        "    - {run: exp02, log: /data/exp02.log, session: train-exp02, gpus: [0, 1], wandb: false, "
        "wandb_path: lab/proj/abc123}\nworkers:",
    )
    s = parse_settings(text, tmp_path / "tw.yaml", env={})
    assert (s.agent_gpu_interval_s, s.agent_nvml, s.agent_spool_max_mb) == (1.0, False, 64.0)
    w = s.watches[1]
    assert (w.run, w.log, w.session, w.gpus, w.wandb, w.wandb_path) == (
        "exp02",
        Path("/data/exp02.log"),
        "train-exp02",
        (0, 1),
        False,
        "lab/proj/abc123",
    )


def test_environment_wins_for_connection_urls(tmp_path):
    s = parse_settings(GOOD, tmp_path / "tw.yaml", env={"REDIS_URL": "redis://other:1/0", "RQ_REDIS_URL": "redis://q"})
    assert s.redis_url == "redis://other:1/0"
    assert s.rq_redis_url == "redis://q"


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("redis_url: x\nbogus: 1\n", "tw.yaml:2:1", "unknown key 'bogus'"),
        ("agent:\n  watch:\n    - run: 'a b'\n      log: x\n", "tw.yaml:3:12", "invalid run name"),
        ("agent:\n  watch:\n    - run: a\n", "tw.yaml:3:7", "needs both 'run' and 'log'"),
        ("workers:\n  reclaim_idle_s: -3\n", "tw.yaml:2:19", "must be positive"),
        ("workers:\n  reclaim_idle_s: soon\n", "tw.yaml:2:19", "'soon' is not a duration"),
        ("host: [a\n", "tw.yaml:2:1", "not valid YAML"),
        ("- 1\n", "tw.yaml:1:1", "must be a mapping"),
        ("agent:\n  nvml: maybe\n", "tw.yaml:2:9", "must be true or false"),
        ("agent:\n  spool_max_mb: 0\n", "tw.yaml:2:17", "must be positive"),
        ("agent:\n  watch:\n    - {run: a, log: x, gpus: [zero]}\n", "tw.yaml:3:30", "list of GPU indexes"),
        ("agent:\n  watch:\n    - {run: a, log: x, session_name: s}\n", "tw.yaml:3:24", "unknown key 'session_name'"),
    ],
)
def test_errors_name_file_line_and_column(tmp_path, text, where, message):
    with pytest.raises(ConfigError) as info:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    assert where in str(info.value)
    assert message in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read settings file"):
        load_settings(Path(tmp_path / "nope.yaml"), env={})


def test_every_problem_is_reported_not_only_the_first(tmp_path):
    text = "redis_url: x\nbogus: 1\nworkers:\n  reclaim_idle_s: soon\n  runs_per_job: 0\nslack:\n  rate_per_s: -1\n"
    with pytest.raises(ConfigError) as info:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    problems = info.value.problems
    assert [p.split(": ", 1)[0].rsplit("tw.yaml:", 1)[1] for p in problems] == [
        "2:1",
        "4:19",
        "5:17",
        "7:15",
    ]  # file order
    assert "4 problems" in str(info.value)


def test_an_unknown_key_suggests_the_closest_one(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'polll_interval_s' in agent; .*did you mean 'poll_interval_s'"):
        parse_settings("agent:\n  polll_interval_s: 1\n", tmp_path / "tw.yaml", env={})


def test_slack_section(tmp_path):
    text = "slack:\n  channel: C1\n  allow:\n    stop: {users: [U1], channels: [C1]}\n    status: {users: [U1, U2]}\n"
    s = parse_settings(text, tmp_path / "tw.yaml", env={})
    assert s.slack.channel == "C1"
    assert s.slack.allows("stop", user="U1", channel="C1") and not s.slack.allows("stop", user="U1", channel="C2")
    assert s.slack.allows("status", user="U2", channel=None) and not s.slack.allows("launch", user="U1", channel=None)
    with pytest.raises(ConfigError, match=r"tw.yaml:3:11: slack.allow.stop needs a 'users' list"):
        parse_settings("slack:\n  allow:\n    stop: {channels: [C1]}\n", tmp_path / "tw.yaml", env={})
