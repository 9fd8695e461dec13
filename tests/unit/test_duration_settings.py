"""Every duration setting (settings file, servers.yaml, experiment files) takes seconds as a number or a duration of
the one grammar (core/durations.py: `90s`, `1m`, `1h30m`, `500ms`), and a bad one is refused at file:line:column
saying why (issue #37: `agent.unreadable_after_s: 1m` was refused)."""

from __future__ import annotations

import pytest
from trainwarden.core.errors import ConfigError, YamlFileError
from trainwarden.remote.fleet import load_fleet

from trainwarden.settings import parse_settings

# section, key, the Settings field (the slack section's land on its BotConfig)
AGENT = ("poll_interval_s", "gpu_interval_s", "process_interval_s", "heartbeat_interval_s", "wandb_stale_s",
         "wandb_api_interval_s", "unreadable_after_s", "first_step_budget_s")  # fmt: skip
WORKERS = ("reclaim_idle_s", "lock_timeout_s", "evidence_timeout_s", "tick_startup_s", "tick_steady_s",
           "tick_max_silence_s", "check_interval_s", "job_timeout_s")  # fmt: skip
SLACK = ("flap_window_s", "keep_running_snooze_s", "stop_outcome_wait_s", "deadman_s", "lease_s")
DURATIONS = [
    ("", "heartbeat_interval_s", "heartbeat_interval_s"),
    *[("agent", k, f"agent_{k}") for k in AGENT],
    *[("workers", k, k) for k in WORKERS],
    *[("slack", k, f"slack.{k}") for k in SLACK],
]
SERVER = "servers:\n  - {name: ic2, host: 10.0.0.5, user: alice, work_dir: /w, connect_timeout_s: %s}\n"


def _text(section: str, key: str, value: str) -> str:
    return f"{key}: {value}\n" if not section else f"{section}:\n  {key}: {value}\n"


def _field(settings: object, name: str) -> object:
    for part in name.split("."):
        settings = getattr(settings, part)
    return settings


@pytest.mark.parametrize(("section", "key", "name"), DURATIONS)
@pytest.mark.parametrize(("value", "seconds"), [("1m", 60.0), ("90s", 90.0), ("1h30m", 5400.0), ("120", 120.0)])
def test_every_duration_setting_takes_a_duration_or_seconds(tmp_path, section, key, name, value, seconds):
    s = parse_settings(_text(section, key, value), tmp_path / "tw.yaml", env={})
    assert _field(s, name) == seconds


def test_milliseconds_and_a_watch_entrys_grace(tmp_path):
    text = "agent:\n  poll_interval_s: 500ms\n  watch:\n    - {run: a, log: a.log, stop_grace_s: 2m}\n"
    s = parse_settings(text, tmp_path / "tw.yaml", env={})
    assert s.agent_poll_interval_s == 0.5 and s.watches[0].stop_grace_s == 120.0


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("agent:\n  unreadable_after_s: 1 mins\n", "tw.yaml:2:23", "'mins' is not a unit"),
        ("agent:\n  unreadable_after_s: 1m 30s\n", "tw.yaml:2:23", "write it without spaces: 1m30s"),
        ("agent:\n  first_step_budget_s: soon\n", "tw.yaml:2:24", "'soon' is not a duration"),
        ("workers:\n  lock_timeout_s: 0s\n", "tw.yaml:2:19", "'lock_timeout_s' must be positive"),
        ("workers:\n  job_timeout_s: 1.5s\n", "tw.yaml:2:18", "'job_timeout_s' must be whole seconds"),
        ("slack:\n  deadman_s: 30m1h\n", "tw.yaml:2:14", "from the largest to the smallest"),
        ("heartbeat_interval_s: true\n", "tw.yaml:1:23", "must be a number of seconds (90) or a duration"),
    ],
)
def test_a_bad_duration_is_refused_at_its_line_and_column_saying_why(tmp_path, text, where, message):
    with pytest.raises(ConfigError) as info:
        parse_settings(text, tmp_path / "tw.yaml", env={})
    assert f"{where}: " in str(info.value) and message in str(info.value), str(info.value)


def test_servers_and_experiments_take_durations_too(tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(SERVER % "500ms")
    (tmp_path / "exp-a.yaml").write_text("name: a\nserver: ic2\ncommand: python t.py\nstop_grace_s: 1m\n")
    fleet = load_fleet(servers, [tmp_path / "exp-a.yaml"])
    assert fleet.servers["ic2"].connect_timeout_s == 0.5 and fleet.experiments["a"].stop_grace_s == 60.0
    servers.write_text(SERVER % "50ms")
    with pytest.raises(YamlFileError, match=r"servers.yaml:2:\d+: 'connect_timeout_s' must be at least 100ms"):
        load_fleet(servers, [])
