"""Where files go: one data directory ($XDG_DATA_HOME/trainwarden) holds every default path, never the cwd."""

import os
from pathlib import Path

import pytest

from trainwarden import writable
from trainwarden.cli import entry as cli
from trainwarden.settings import DATA_DIR_ENV, Settings, default_data_dir, load_settings


def test_the_data_dir_follows_xdg_then_home(tmp_path: Path):
    assert default_data_dir({"XDG_DATA_HOME": str(tmp_path), "HOME": "/h"}) == tmp_path / "trainwarden"
    assert default_data_dir({"HOME": "/h"}) == Path("/h/.local/share/trainwarden")
    # the XDG spec: a relative XDG_DATA_HOME is invalid and ignored
    assert default_data_dir({"XDG_DATA_HOME": "rel/data", "HOME": "/h"}) == Path("/h/.local/share/trainwarden")
    both = {DATA_DIR_ENV: str(tmp_path / "d"), "XDG_DATA_HOME": "/x", "HOME": "/h"}
    assert default_data_dir(both) == tmp_path / "d"


def test_without_a_settings_file_every_written_path_is_in_the_data_dir(tmp_path: Path):
    data = tmp_path / "xdg" / "trainwarden"
    settings = load_settings(None, env={"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert settings.data_dir == data
    written = {p.setting: p.path for p in writable.paths_written(settings)}
    assert written == {
        "evidence_dir": data / "evidence",
        "findings_file": data / "findings.md",
        "agent.state_file": data / "agent-state.json",
        "agent.spool_dir": data / "spool",
        "archive_dir": data / "archive",
    }


def test_plain_settings_objects_use_the_environments_data_dir(data_home: Path):
    settings = Settings()
    assert settings.data_dir == data_home / "trainwarden"  # conftest's XDG_DATA_HOME: never the user's own
    assert settings.evidence_dir == data_home / "trainwarden" / "evidence"


def test_a_settings_file_moves_the_data_dir_or_single_paths(tmp_path: Path):
    conf = tmp_path / "conf"
    conf.mkdir()
    path = conf / "trainwarden.yaml"
    path.write_text("data_dir: ../tw-data\nevidence_dir: /srv/evidence\n")
    settings = load_settings(path, env={"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert settings.data_dir == tmp_path / "tw-data"  # relative to the settings file, like every path in it
    assert settings.evidence_dir == Path("/srv/evidence")  # set on its own: kept
    assert settings.findings_file == tmp_path / "tw-data" / "findings.md"
    assert settings.agent_state_file == tmp_path / "tw-data" / "agent-state.json"

    path.write_text("host: h\n")  # no data_dir in the file: the environment's
    assert load_settings(path, env={"XDG_DATA_HOME": str(tmp_path / "xdg")}).findings_file == (
        tmp_path / "xdg" / "trainwarden" / "findings.md"
    )


def test_config_check_prints_the_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch):  # fmt: skip
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("TRAINWARDEN_CONFIG", raising=False)
    assert cli.main(["config", "check"]) == 0
    out = capsys.readouterr().out
    assert f"data directory: {tmp_path / 'trainwarden'}" in out
    assert f"evidence_dir (worker): {tmp_path / 'trainwarden' / 'evidence'}: writable" in out
    assert not (tmp_path / "trainwarden").exists()  # checking writes nothing that stays


def test_with_servers_configured_stop_notes_go_to_the_projects_findings_md(tmp_path: Path):
    """The procedure keeps findings.md in the project root (beside experiments/ and status.yaml), where
    `collect` appends too; a findings_file in the file still wins, and without servers the data dir's."""
    proj = tmp_path / "proj"
    proj.mkdir()
    path = proj / "trainwarden.yaml"
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    path.write_text("servers_file: servers.yaml\n")  # experiments/ beside it by default
    assert load_settings(path, env=env).findings_file == proj / "findings.md"
    (proj / "lab").mkdir()
    path.write_text("servers_file: conf/servers.yaml\nexperiments_dir: lab/experiments\n")
    assert load_settings(path, env=env).findings_file == proj / "lab" / "findings.md"
    path.write_text("servers_file: servers.yaml\nfindings_file: notes/f.md\n")
    assert load_settings(path, env=env).findings_file == proj / "notes" / "f.md"
    path.write_text("host: h\n")
    assert load_settings(path, env=env).findings_file == tmp_path / "xdg" / "trainwarden" / "findings.md"
    path.write_text("servers_file: servers.yaml\n")
    proj.chmod(0o555)  # a read-only project (Docker mounts /config so): the data dir's, no note lost
    try:
        if not os.access(proj, os.W_OK):  # root writes anywhere: nothing to check then
            assert load_settings(path, env=env).findings_file == tmp_path / "xdg" / "trainwarden" / "findings.md"
    finally:
        proj.chmod(0o755)
