"""The shipped Docker image and compose file: what the processes write lands on a writable volume.

No docker here: the compose file is read as YAML (anchors and merge keys as compose reads them),
the Dockerfile line by line, and the settings' defaults are resolved against the image's working
data directory (TRAINWARDEN_DATA_DIR).
"""

import shlex
from pathlib import PurePosixPath

from tests.deploy_files import compose, dockerfile, interpolate
from trainwarden.settings import DATA_DIR_ENV, load_settings


def image_services() -> list[str]:
    return [name for name, service in compose()["services"].items() if "build" in service]


def instructions(word: str) -> list[str]:
    return [i.args for i in dockerfile() if i.word == word]


def image_env() -> dict[str, str]:
    return dict(pair.split("=", 1) for args in instructions("ENV") for pair in shlex.split(args))


def mounts(service: dict) -> list[tuple[str, str, bool]]:
    """(source, target, read-only) of each short-syntax volume."""
    out = []
    for spec in service.get("volumes", []):
        parts = interpolate(spec, {"HOME": "/home/someone"}).split(":")
        out.append((parts[0], parts[1], parts[2:] == ["ro"]))
    return out


def covering(path: PurePosixPath, service: dict) -> tuple[str, str, bool] | None:
    found = [m for m in mounts(service) if path.is_relative_to(m[1])]
    return max(found, key=lambda m: len(m[1])) if found else None


def test_the_image_runs_in_a_declared_volume_owned_by_its_user():
    workdir = PurePosixPath(instructions("WORKDIR")[-1])
    assert instructions("USER")[-1] == "trainwarden"
    assert f'["{workdir}"]' in instructions("VOLUME") or str(workdir) in instructions("VOLUME")
    assert any(f"chown trainwarden:0 {workdir}" in run for run in instructions("RUN"))
    assert any(f"chmod 2775 {workdir}" in run for run in instructions("RUN")), "writable by group 0 (any uid)"


def test_default_write_paths_resolve_onto_the_writable_data_volume():
    env = image_env()
    settings = load_settings(env=env)  # the settings file leaves the paths unset: the image's defaults
    assert str(settings.data_dir) == env[DATA_DIR_ENV]
    services = compose()["services"]
    declared = set(compose()["volumes"])
    for name in image_services():
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
