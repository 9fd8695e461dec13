"""Redis with a password, an ACL user and TLS: the daemons work with the right URL; with wrong
credentials each says so in one line (the URL's password masked) and exits non-zero.

Real redis-server (requirepass, ACL SETUSER, --tls-port with a throwaway CA), real daemons."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from trainwarden.events.heartbeat import read_beats
from trainwarden.events.keys import Keys

from tests.conftest import cli_argv, spawn, stop_process
from tests.helpers import wait_for
from tests.tls import make_certs
from trainwarden.tools.redis_server import RedisServer, free_port

PASSWORD = "pw-0f7c1d9e-secret"
USER, USER_PASSWORD = "trainwarden", "acl-8b2e44a1-secret"
WRONG = "wrong-5d3a-password"
DAEMONS = (("agent",), ("dispatcher",), ("worker",), ("bot",))


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis-auth"), password=PASSWORD).start()
    client = server.client()
    client.execute_command("ACL", "SETUSER", USER, "on", f">{USER_PASSWORD}", "~*", "&*", "+@all")
    client.close()
    yield server
    server.stop()


def settings_for(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "trainwarden.yaml"
    body = {
        "redis_url": url,
        "host": "authhost",
        "heartbeat_interval_s": 0.25,
        "evidence_dir": str(tmp_path / "evidence"),
        "findings_file": str(tmp_path / "findings.md"),
        "agent": {"state_file": str(tmp_path / "offsets.json"), "poll_interval_s": 0.05, "nvml": False},
    }
    path.write_text(yaml.safe_dump(body))
    return path


def run_all(settings: Path, *extra: str) -> list[subprocess.CompletedProcess[str]]:
    """Each daemon started at once (in parallel), waited for."""
    procs = [
        subprocess.Popen(
            cli_argv(settings, *d, *extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        for d in DAEMONS
    ]
    done = []
    for argv, proc in zip(DAEMONS, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def assert_refused(done: subprocess.CompletedProcess[str], secret: str, masked_url: str) -> None:
    assert done.returncode != 0, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"{done.args}: expected one line, got:\n{done.stderr}"
    assert "refused the credentials" in lines[0] and masked_url in lines[0], lines[0]
    assert secret not in done.stderr + done.stdout


def test_right_password_works_and_is_never_shown(locked: RedisServer, tmp_path: Path) -> None:
    settings = settings_for(tmp_path, locked.url)
    procs = [spawn(settings, tmp_path / f"{d[0]}.log", *d) for d in DAEMONS]
    try:
        client = locked.client()
        wanted = {"agent", "dispatcher", "worker", "notifier"}
        wait_for(lambda: {b.role for b in read_beats(client, Keys())} >= wanted, timeout=40, what="every heartbeat")
        health = subprocess.run(cli_argv(settings, "health"), capture_output=True, text=True, timeout=30, check=False)
        assert health.returncode == 0, health.stdout + health.stderr
        assert PASSWORD not in health.stdout + health.stderr
    finally:
        for proc in procs:
            stop_process(proc)
    for d in DAEMONS:
        assert PASSWORD not in (tmp_path / f"{d[0]}.log").read_text()


def test_wrong_password_one_line_each_daemon(locked: RedisServer, tmp_path: Path) -> None:
    url = f"redis://:{WRONG}@127.0.0.1:{locked.port}/0"
    for done in run_all(settings_for(tmp_path, url)):
        assert_refused(done, WRONG, f"redis://:***@127.0.0.1:{locked.port}/0")


def test_no_password_one_line(locked: RedisServer, tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{locked.port}/0"
    done = subprocess.run(cli_argv(settings_for(tmp_path, url), "dispatcher"), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "refused the credentials" in done.stderr and f"redis://127.0.0.1:{locked.port}/0" in done.stderr


def test_acl_user(locked: RedisServer, tmp_path: Path) -> None:
    good = settings_for(tmp_path, f"redis://{USER}:{USER_PASSWORD}@127.0.0.1:{locked.port}/0")
    for argv in (("agent", "--burst"), ("dispatcher", "--burst")):
        done = subprocess.run(cli_argv(good, *argv), capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert USER_PASSWORD not in done.stdout + done.stderr
    (tmp_path / "bad").mkdir()
    bad = settings_for(tmp_path / "bad", f"redis://{USER}:{WRONG}@127.0.0.1:{locked.port}/0")
    done = subprocess.run(cli_argv(bad, "worker"), capture_output=True, text=True, timeout=60, check=False)
    assert_refused(subprocess.CompletedProcess(done.args, done.returncode, done.stdout, done.stderr), WRONG,
                   f"redis://{USER}:***@127.0.0.1:{locked.port}/0")  # fmt: skip


def test_rediss_with_ca_in_the_url(tmp_path: Path) -> None:
    """rediss:// with `?ssl_ca_certs=`: the daemons' loops work over TLS (and with a password)."""
    ca, cert, key = make_certs(tmp_path)
    tls_port = free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]  # fmt: skip
    with RedisServer(tmp_path / "redis", extra_args=args, password=PASSWORD) as server:
        url = f"rediss://:{PASSWORD}@127.0.0.1:{tls_port}/0?ssl_ca_certs={ca}"
        settings = settings_for(tmp_path, url)
        for argv in (("agent", "--burst"), ("dispatcher", "--burst"), ("bot", "--burst")):
            done = subprocess.run(cli_argv(settings, *argv), capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            assert PASSWORD not in done.stdout + done.stderr
        client = server.client()
        assert {b.role for b in read_beats(client, Keys())} == {"agent", "dispatcher", "notifier"}
        # the plain port refuses nothing here; TLS without the CA is refused by certificate checks
        no_ca = settings_for(tmp_path, f"rediss://:{PASSWORD}@127.0.0.1:{tls_port}/0")
        done = subprocess.run(cli_argv(no_ca, "dispatcher", "--burst"), capture_output=True, text=True, timeout=60,
                              check=False)  # fmt: skip
        assert done.returncode != 0 and PASSWORD not in done.stdout + done.stderr
