"""The GPU server's agent files under deploy/: the example settings `/etc/trainwarden/agent.yaml` that its
systemd unit reads (loaded with the real settings loader, its commented watch example too), and the unit's
refusal to start without it (instead of a restart every 5 s on a missing file)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.deploy_files import DEPLOY
from trainwarden.settings import load_settings

AGENT_YAML = DEPLOY / "agent.yaml"
UNIT = DEPLOY / "trainwarden-agent.service"


def unit_values(key: str) -> list[str]:
    return [line.partition("=")[2] for line in UNIT.read_text().splitlines() if line.startswith(f"{key}=")]


def test_the_example_agent_settings_load() -> None:
    settings = load_settings(AGENT_YAML, env={})
    assert settings.watches == () and settings.agent_nvml is True
    assert "redis_url" not in AGENT_YAML.read_text().replace("#", "\n#")  # the password's URL is the environment's


def test_its_commented_watch_example_loads_too(tmp_path: Path) -> None:
    text = re.sub(r"(?m)^  #(watch:|  )", r"  \1", AGENT_YAML.read_text().replace("  watch: []\n", ""))
    (uncommented := tmp_path / "agent.yaml").write_text(text)
    (watch,) = load_settings(uncommented, env={}).watches
    assert (watch.run, watch.session, watch.gpus) == ("exp01", "train-exp01", (0, 1))


def test_the_agent_unit_will_not_start_without_its_settings() -> None:
    (config,) = [v.partition("=")[2] for v in unit_values("Environment") if v.startswith("TRAINWARDEN_CONFIG=")]
    assert unit_values("AssertPathExists") == [config] == ["/etc/trainwarden/agent.yaml"]
    assert f"install -D -m 0644 deploy/agent.yaml {config}" in UNIT.read_text()
