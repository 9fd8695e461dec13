"""deploy/docker-compose.yml renders and starts as shipped: every path it references exists in the repository,
every service runs a real `trainwarden` subcommand, has a health check and waits for a healthy Redis, and
its settings (deploy/config) load. `docker compose config` renders it too where the plugin is installed
(it is not on the CI machine: the YAML checks below stand for it there)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from tests.deploy_files import COMPOSE, DEPLOY, compose, interpolate, trainwarden_accepts, variables
from trainwarden import wiring
from trainwarden.settings import load_settings

ALWAYS_SET = {"HOME"}  # set in any shell that runs compose: no default needed
ENV = {"HOME": "/home/someone"}


def services() -> dict[str, dict]:
    return compose()["services"]


def image_services() -> dict[str, dict]:
    """The services built from the repository's Dockerfile (the trainwarden daemons)."""
    return {name: s for name, s in services().items() if "build" in s}


def bind_mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of each short-syntax bind mount (a source that is a path, not a named volume)."""
    out = []
    for spec in service.get("volumes", []):
        source, target = interpolate(spec, ENV).split(":")[:2]
        if source.startswith(("/", ".", "~")):
            out.append((source, target))
    return out


def test_compose_renders_with_docker_compose_where_installed() -> None:
    docker = shutil.which("docker")
    has_plugin = docker is not None and subprocess.run(
        [docker, "compose", "version"], capture_output=True, check=False).returncode == 0  # fmt: skip
    if not has_plugin:
        pytest.skip("the docker compose plugin is not installed here (the YAML checks in this file stand for it)")
    done = subprocess.run([docker, "compose", "-f", str(COMPOSE), "config", "--quiet"], capture_output=True,
                          text=True, env={**os.environ, "SLACK_BOT_TOKEN": ""}, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_every_variable_has_a_default_or_is_always_set() -> None:
    for name, default in variables(COMPOSE.read_text()):
        assert default is not None or name in ALWAYS_SET, f"${{{name}}} has no default: compose warns and uses ''"


def test_every_image_service_builds_from_the_repository_dockerfile() -> None:
    assert set(image_services()) >= {"dispatcher", "worker", "bot"}
    for name, service in image_services().items():
        build = service["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert (context / build.get("dockerfile", "Dockerfile")).is_file(), f"{name}: no Dockerfile in {context}"


def test_every_bind_mounted_repository_path_exists() -> None:
    for name, service in image_services().items():
        mounts = dict(bind_mounts(service))
        assert mounts, f"{name} mounts nothing"
        for source, target in mounts.items():
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source} (mounted at {target}) is not in the repository"
        config = PurePosixPath(service["environment"]["TRAINWARDEN_CONFIG"])
        (source,) = [s for s, t in mounts.items() if config.is_relative_to(t)]
        assert (DEPLOY / source / config.relative_to(config.parent)).is_file(), f"{name}: {config} is not shipped"


def test_the_named_volumes_are_declared() -> None:
    declared = set(compose().get("volumes", {}))
    for name, service in services().items():
        for spec in service.get("volumes", []):
            source = spec.split(":")[0]
            if not source.startswith(("/", ".", "~", "$")):
                assert source in declared, f"{name}: volume {source} is not declared"


def test_every_service_runs_a_real_trainwarden_subcommand() -> None:
    for name, service in image_services().items():
        assert trainwarden_accepts(service["command"]), f"{name}: `trainwarden {' '.join(service['command'])}`"
    assert not trainwarden_accepts(["dispatchr"])  # the check itself can fail


def test_every_service_has_a_health_check_and_waits_for_a_healthy_redis() -> None:
    everything = services()
    for name, service in everything.items():
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name} has no health check"
        if name == "redis":
            assert test[1:] == ["redis-cli", "ping"]
            continue
        assert test[1] == "trainwarden" and trainwarden_accepts(test[2:]), f"{name}: {test}"
        assert "--here" in test, f"{name}: its health must be its own daemon's, not every host's"
        depends = service["depends_on"]
        assert depends["redis"]["condition"] == "service_healthy", name
        for other, how in depends.items():
            assert how["condition"] == "service_healthy" and "healthcheck" in everything[other], (name, other)


def test_each_daemon_has_a_host_name_of_its_own() -> None:
    """A fixed hostname keeps a recreated container's row in `trainwarden health` (no stale STOPPED row)
    and no two daemons share a heartbeat."""
    names = [service.get("hostname") for service in image_services().values()]
    assert None not in names and len(set(names)) == len(names), names
    for service in image_services().values():
        assert "replicas" not in service.get("deploy", {}), "replicas share one hostname: add a service instead"


def test_the_ssh_keys_are_mounted_read_only_for_the_uid_that_owns_them() -> None:
    for name, service in image_services().items():
        ssh = [spec for spec in service["volumes"] if ".ssh" in spec]
        assert len(ssh) == 1 and ssh[0].endswith(":/home/trainwarden/.ssh:ro"), name
        assert interpolate(ssh[0], ENV).startswith("/home/someone/.ssh:")
        assert interpolate(ssh[0], {**ENV, "TRAINWARDEN_SSH_DIR": "/srv/keys"}).startswith("/srv/keys:")
        user = service["user"]
        assert interpolate(user, ENV) == "1000:0", "the image's user by default, group 0 (owner of /data)"
        assert interpolate(user, {"TRAINWARDEN_UID": "1234"}) == "1234:0"


def test_the_shipped_settings_servers_and_experiments_load(tmp_path: Path) -> None:
    env = {"TRAINWARDEN_DATA_DIR": str(tmp_path), **image_services()["worker"]["environment"]}
    env["TRAINWARDEN_CONFIG"] = str(DEPLOY / "config" / "trainwarden.yaml")
    settings = load_settings(env=env)
    assert settings.redis_url == "redis://redis:6379/0"  # from the environment, not the file
    for path in (settings.evidence_dir, settings.archive_dir):
        assert path.is_relative_to(tmp_path), f"{path}: the example must leave the write paths to /data"
    fleet = wiring.fleet(settings, required=True)
    assert fleet is not None
    assert set(fleet.servers) and set(fleet.experiments)
    assert all(e.server in fleet.servers for e in fleet.experiments.values())
