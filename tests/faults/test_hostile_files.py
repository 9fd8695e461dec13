"""Files that once hung or fooled the checks, refused in one line naming the file (and the line and column
where there is one): a 50 MB policy (PyYAML parsed it for minutes, saying nothing), a `log_pattern` that
backtracks catastrophically (it runs on every log line: one bad line would hold a worker for minutes),
and a Slack HTTP port of 99999999. Real `trainwarden` processes, as an operator runs them."""

import subprocess
import time

import pytest

from tests.conftest import REPO, cli_argv

PATTERN_POLICY = """name: team
rules:
  - id: log-slow
    kind: log_pattern
    pattern: '(\\w+\\s?)*$'
    severity: warning
"""


def cli(settings_file, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(settings_file, *args), capture_output=True, text=True, timeout=60, cwd=REPO,
                          check=False)  # fmt: skip


def test_a_50_mb_policy_is_refused_at_once(settings_file, tmp_path):
    policy = tmp_path / "huge.yaml"
    policy.write_text("name: huge\nrules:\n" + "# padding\n" * 5_000_000)
    started = time.monotonic()
    out = cli(settings_file, "policy", "check", str(policy))
    print(f"refused in {time.monotonic() - started:.1f} s")  # reported, not asserted: timings vary by machine
    assert out.returncode == 1, out
    said = out.stderr + out.stdout
    assert f"{policy}: 50,000,018 characters, over the 1,000,000 a trainwarden YAML file may have" in said


def test_a_catastrophic_log_pattern_is_refused_where_it_is_written(settings_file, tmp_path):
    policy = tmp_path / "team.yaml"
    policy.write_text(PATTERN_POLICY)
    out = cli(settings_file, "policy", "check", str(policy))
    text = out.stdout + out.stderr
    assert out.returncode == 1, out
    assert f"{policy}:5:" in text and "can backtrack catastrophically" in text, text


@pytest.mark.parametrize("port", ["99999999", "0"])
def test_a_port_out_of_range_is_refused_where_it_is_written(tmp_path, port):
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(f"redis_url: redis://127.0.0.1:1/0\nslack:\n  http_port: {port}\n")
    out = cli(settings, "config", "check")
    text = out.stdout + out.stderr
    assert out.returncode == 1, out
    assert f"{settings}:3:" in text and "'http_port' must be at" in text, text
