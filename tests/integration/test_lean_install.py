"""A base install (redis, pyyaml) runs the agent; a command whose extra is missing says, in one line,
which extra to install. The missing packages are hidden from a real `trainwarden` process by a
meta-path finder, as if they were not installed."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

OPTIONAL = ("rq", "asyncssh", "matplotlib", "slack_bolt", "slack_sdk", "wandb", "pynvml", "tensorboard", "mcp")
RUN_HIDDEN = """
import runpy, sys
hidden, tried = set(sys.argv[1].split(",")), set()
class Hide:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in hidden:
            tried.add(top)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
sys.argv = ["trainwarden", *sys.argv[2:]]
try:
    runpy.run_module("trainwarden", run_name="__main__", alter_sys=True)
finally:
    print("TRIED", ",".join(sorted(tried)), "LOADED", ",".join(sorted(hidden & set(sys.modules))))
"""


def run_hidden(hidden: tuple[str, ...], *args: str, env: dict[str, str] | None = None, cwd: Path = REPO):
    clean = {k: v for k, v in os.environ.items() if k not in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "WANDB_API_KEY")}
    return subprocess.run([sys.executable, "-c", RUN_HIDDEN, ",".join(hidden), *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd, env={**clean, **(env or {})}, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "env", "hidden", "extra"),
    [
        (("worker",), {}, "rq", "server"),
        (("worker",), {}, "matplotlib", "server"),
        (("dispatcher",), {}, "rq", "server"),
        (("bot",), {"SLACK_BOT_TOKEN": "xoxb-x"}, "slack_bolt", "bot"),
        (("launch", "exp1", "--config", "tw.yaml"), {}, "asyncssh", "server"),  # remote: servers configured
        (("plan", "status", "p.yaml"), {}, "asyncssh", "server"),
        (("mcp",), {}, "mcp", "mcp"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(args, env, hidden, extra, tmp_path):
    (tmp_path / "tw.yaml").write_text("servers_file: servers.yaml\n")  # never read: the extra is missing first
    done = run_hidden((hidden,), "--redis-url", "redis://127.0.0.1:1/0", *args, env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"trainwarden {args[0]} needs {hidden}: pip install 'trainwarden[{extra}]'"]


def test_the_agent_runs_without_any_optional_package(settings_file, tmp_path):
    done = run_hidden(OPTIONAL, "--config", str(settings_file), "agent", "--burst")
    assert done.returncode == 0, done.stdout + done.stderr
    tried, loaded = done.stdout.split("TRIED ")[1].split(" LOADED ")
    assert set(tried.split(",")) - {""} <= {"pynvml"}  # NVML is tried (the gpu extra) and reported missing
    assert loaded.strip() == ""
    assert "nvidia-ml-py is not installed (pip install 'trainwarden[gpu]')" in done.stderr


def test_the_console_bot_needs_neither_slack_nor_the_server_extra(settings_file):
    done = run_hidden(OPTIONAL, "--config", str(settings_file), "bot", "--burst")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split("TRIED ")[1].split(" LOADED ")[0] == ""


def test_version_is_the_installed_distributions():
    done = subprocess.run([sys.executable, "-m", "trainwarden", "--version"], capture_output=True, text=True,
                          check=True, cwd=REPO)  # fmt: skip
    assert done.stdout.strip() == f"trainwarden {importlib.metadata.version('trainwarden')}"


def test_a_tensorboard_file_without_the_tensorboard_extra_says_which_extra(tmp_path):
    events = REPO / "tests" / "data" / "real" / "lightning_tb_sketch_retrieval_valloss_up_map_up.events.out.tfevents"
    done = run_hidden(("tensorboard",), "policy", "backtest", "default", "--log", str(events), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().endswith("install it with: pip install 'trainwarden[tensorboard]'")
