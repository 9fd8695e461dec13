"""The shipped Docker image and compose file: what the processes write lands on a writable volume.

No docker here: the compose file is read as YAML (anchors and merge keys as compose reads them),
the Dockerfile line by line, and the settings' defaults are resolved against the image's working
data directory (TRAINWARDEN_DATA_DIR).
"""

from pathlib import PurePosixPath

import yaml

from tests.conftest import REPO
from trainwarden.settings import DATA_DIR_ENV, load_settings

IMAGE_SERVICES = ("dispatcher", "worker", "bot")


def dockerfile() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.setdefault(word, []).append(rest.strip())
    return out


def compose() -> dict:
    return yaml.safe_load((REPO / "deploy" / "docker-compose.yml").read_text())


def mounts(service: dict) -> list[tuple[str, str, bool]]:
    """(source, target, read-only) of each short-syntax volume."""
    out = []
    for spec in service.get("volumes", []):
        parts = spec.split(":")
        out.append((parts[0], parts[1], parts[2:] == ["ro"]))
    return out


def covering(path: PurePosixPath, service: dict) -> tuple[str, str, bool] | None:
    found = [m for m in mounts(service) if path.is_relative_to(m[1])]
    return max(found, key=lambda m: len(m[1])) if found else None


def test_the_image_runs_in_a_declared_volume_owned_by_its_user():
    d = dockerfile()
    workdir = PurePosixPath(d["WORKDIR"][-1])
    assert d["USER"][-1] == "trainwarden"
    assert f'["{workdir}"]' in d["VOLUME"] or str(workdir) in d["VOLUME"]
    assert any(f"chown trainwarden {workdir}" in run for run in d["RUN"])


def test_default_write_paths_resolve_onto_the_writable_data_volume():
    image_env = dict(line.split("=", 1) for line in dockerfile()["ENV"])
    settings = load_settings(env=image_env)  # the settings file leaves the paths unset: the image's defaults
    assert str(settings.data_dir) == image_env[DATA_DIR_ENV]
    services = compose()["services"]
    declared = set(compose()["volumes"])
    for name in IMAGE_SERVICES:
        service = services[name]
        config = PurePosixPath(service["environment"]["TRAINWARDEN_CONFIG"])
        for path in (settings.evidence_dir, settings.findings_file, settings.archive_dir):
            where = PurePosixPath(path)
            mount = covering(where, service)
            assert mount is not None, f"{name}: {where} is on no volume"
            source, _, read_only = mount
            assert source in declared and not read_only, f"{name}: {where} is on {mount}"
            assert not where.is_relative_to(config.parent)  # never beside the read-only settings
        assert covering(config, service)[2], f"{name}: the settings are mounted read-only"


def test_the_bot_is_reachable_by_slack():
    bot = compose()["services"]["bot"]
    assert "SLACK_APP_TOKEN" in bot["environment"]  # Socket Mode: outbound only
    assert any(p.endswith(":3000") for p in bot.get("ports", [])), "HTTP mode's port is published"
