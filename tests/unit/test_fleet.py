import re
import shlex
from datetime import date
from pathlib import Path

import pytest
from trainwarden.core.errors import YamlFileError
from trainwarden.remote.fleet import Experiment, Server, WandbConfig, load_fleet
from trainwarden.remote.runscript import (
    default_run_name,
    env_file,
    run_paths,
    run_script,
    sidecar_path,
    split_env,
    wandb_guard,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOOD_SERVERS = """\
servers:
  - name: ic2
    host: 10.0.0.5
    user: alice
    work_dir: /home/alice/proj
    gpus: [0, 1]
    conda_env: torch
"""


def expectation(path: Path) -> tuple[str, str]:
    m = re.match(r"# expect: (\d+:\d+): (.*)", path.read_text().splitlines()[0])
    assert m, f"{path} lacks its '# expect:' line"
    return m.group(1), m.group(2)


@pytest.mark.parametrize("path", sorted((FIXTURES / "servers_invalid").glob("*.yaml")), ids=lambda p: p.stem)
def test_invalid_servers_file(path):
    where, message = expectation(path)
    with pytest.raises(YamlFileError) as info:
        load_fleet(path, [])
    assert f"{path}:{where}: " in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("path", sorted((FIXTURES / "experiments_invalid").glob("*.yaml")), ids=lambda p: p.stem)
def test_invalid_experiment_file(path, tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(GOOD_SERVERS)
    where, message = expectation(path)
    with pytest.raises(YamlFileError) as info:
        load_fleet(servers, [path])
    assert f"{path}:{where}: " in str(info.value)
    assert message in str(info.value)


def test_every_problem_of_a_servers_file_is_reported(tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(
        "servers:\n  - name: ic2\n    host: ic2;reboot\n    user: alice\n    work_dir: /w\n    prot: 22\n"
        "  - name: ic3\n    user: bob\n    work_dir: /w\n    gpus: [0, 0]\n"
    )
    with pytest.raises(YamlFileError) as info:
        load_fleet(servers, [])
    assert info.value.problems == [
        f"{servers}:3:11: host 'ic2;reboot' is not a host name or IP address",
        f"{servers}:6:5: unknown key 'prot' in a server; expected one of: conda_env, connect_timeout_s, gpus, host, "
        "key_file, known_hosts, min_free_gb, name, port, scratch, tmux_socket, user, venv, work_dir; "
        "did you mean 'port'?",
        f"{servers}:7:5: a server needs 'host'",
        f"{servers}:10:11: gpus lists a GPU twice",
    ]


def test_problems_in_several_experiment_files_are_reported_together(tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(GOOD_SERVERS)
    (tmp_path / "exp-a.yaml").write_text("name: a\nserver: ic9\ncommand: python t.py\nepochs: 0\n")
    (tmp_path / "exp-b.yaml").write_text("name: b\nserver: ic2\nscript: run.sh\ncheckpoints: {dir: c, mode: best}\n")
    with pytest.raises(YamlFileError) as info:
        load_fleet(servers, sorted(tmp_path.glob("exp-*.yaml")))
    assert [p.split(": ", 1)[0].rsplit("/", 1)[1] for p in info.value.problems] == [
        "exp-a.yaml:2:9",
        "exp-a.yaml:4:9",
        "exp-b.yaml:4:29",
    ]  # fmt: skip  (by file, then line)
    assert "3 problems" in str(info.value)


def test_cycle_is_reported(tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(GOOD_SERVERS)
    for a, b in (("a", "b"), ("b", "a")):
        (tmp_path / f"exp-{a}.yaml").write_text(f"name: {a}\nserver: ic2\ncommand: python t.py\ndepends_on: [{b}]\n")
    with pytest.raises(YamlFileError, match="cycle: a -> b -> a"):
        load_fleet(servers, sorted(tmp_path.glob("exp-*.yaml")))


def test_good_fleet(tmp_path):
    servers = tmp_path / "servers.yaml"
    servers.write_text(GOOD_SERVERS)
    (tmp_path / "exp-a.yaml").write_text(
        "name: a\nserver: ic2\ngpus: 2\ncommand: python train.py --lr 3e-4\nenv: {WANDB_PROJECT: p, SEED: 1}\n"
        "wandb: {project: p, group: g}\nparams: {lr: 3e-4}\nstop_command: [touch, STOP]\n"
    )
    fleet = load_fleet(servers, [tmp_path / "exp-a.yaml"])
    exp = fleet.experiments["a"]
    assert exp.command == ("python", "train.py", "--lr", "3e-4")
    assert exp.gpus == 2 and exp.gpu_ids is None
    assert exp.env == {"WANDB_PROJECT": "p", "SEED": "1"}
    assert exp.stop_command == ("touch", "STOP")
    assert fleet.server_of(exp).conda_env == "torch"


SERVER = Server(name="ic2", host="h", user="u", work_dir="/w d", conda_env="torch")


def exp(**kw):
    return Experiment(**{"name": "e1", "server": "ic2", "command": ("python", "t.py"), **kw})


def test_wandb_guard():
    assert wandb_guard(exp(env={"WANDB_MODE": "offline"})) == "env sets WANDB_MODE=offline"
    assert wandb_guard(exp(env={"WANDB_MODE": "Disabled"})) == "env sets WANDB_MODE=disabled"
    assert wandb_guard(exp(env={"WANDB_DISABLED": "true"})) == "env sets WANDB_DISABLED"
    assert wandb_guard(exp(command=("env", "WANDB_MODE=offline", "python"))) == "the command sets WANDB_MODE=offline"
    assert wandb_guard(exp(env={"WANDB_MODE": "online"})) is None
    assert wandb_guard(exp(env={"WANDB_MODE": "offline"}, allow_offline_wandb=True)) is None


def test_default_run_name_holds_date_and_differing_params():
    a = exp(name="a", params={"lr": "3e-4", "bs": "32"}, wandb=WandbConfig(group="g"))
    b = exp(name="b", params={"lr": "1e-3", "bs": "32"}, wandb=WandbConfig(group="g"))
    assert default_run_name(a, [a, b], date(2026, 12, 2)) == "a-20261202-lr3e-4"
    assert default_run_name(a, [a], date(2026, 12, 2)) == "a-20261202-bs32-lr3e-4"


def test_secrets_go_to_the_env_file_only():
    e = exp(env={"HF_TOKEN": "hf-x", "SEED": "1"})
    plain, secret = split_env(e, {"WANDB_API_KEY": "k$(id)"})
    assert plain == {"SEED": "1"}
    assert env_file(secret) == "HF_TOKEN=hf-x\nWANDB_API_KEY='k$(id)'\n"
    script = run_script(experiment=e, server=SERVER, run="e1", gpu_ids=[0, 1], wandb_run_name="n",
                        plain_env=plain, command=("python", "t.py", "$(reboot)"))  # fmt: skip
    assert "hf-x" not in script and "k$(id)" not in script
    assert "export CUDA_VISIBLE_DEVICES=0,1" in script
    assert "cd '/w d'" in script
    assert "exec -- python t.py '$(reboot)' ) 2>&1 | ( trap '' INT TERM HUP; tee -a" in script
    assert "conda activate torch" in script


def test_the_sidecar_file_is_beside_the_log_unless_the_experiment_names_one():
    paths = run_paths(SERVER, "e1")
    assert sidecar_path(exp(), SERVER, paths) == paths.metrics == f"{paths.log}.metrics.jsonl"
    script = run_script(experiment=exp(), server=SERVER, run="e1", gpu_ids=[0], wandb_run_name="n", plain_env={},
                        command=("python", "t.py"))  # fmt: skip
    assert f"export TRAINWARDEN_METRICS={shlex.quote(paths.metrics)}" in script
    assert sidecar_path(exp(env={"TRAINWARDEN_METRICS": "/data/m.jsonl"}), SERVER, paths) == "/data/m.jsonl"
    relative = exp(env={"TRAINWARDEN_METRICS": "out/m.jsonl"}, code_dir="/code")
    assert sidecar_path(relative, SERVER, paths) == "/code/out/m.jsonl"  # the process writes it from its code dir


def test_a_plan_reports_every_problem(tmp_path):
    from trainwarden.remote.plan import parse_plan

    servers = tmp_path / "servers.yaml"
    servers.write_text(GOOD_SERVERS)
    (tmp_path / "exp-a.yaml").write_text("name: a\nserver: ic2\ncommand: python t.py\n")
    fleet = load_fleet(servers, [tmp_path / "exp-a.yaml"])
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p\nexperiments: [a, b]\nmax_parallel: 0\nparalel: 2\n")
    with pytest.raises(YamlFileError) as info:
        parse_plan(plan, fleet)
    assert info.value.problems == [
        f"{plan}:2:18: unknown experiment 'b'",
        f"{plan}:3:15: 'max_parallel' must be at least 1, got 0",
        f"{plan}:4:1: unknown key 'paralel' in a plan; expected one of: experiments, max_parallel, name; "
        "did you mean 'max_parallel'?",
    ]
    plan.write_text("name: p\nexperiments: [a]\nmax_parallel: 2\n")
    assert parse_plan(plan, fleet).experiments == ("a",)


def test_a_launch_tells_whether_its_run_uses_wandb():
    from trainwarden.remote.runscript import launched_with_wandb

    assert launched_with_wandb(["FINISH_AT"], "proj") is True  # the run script exports WANDB_PROJECT
    assert launched_with_wandb(["WANDB_ENTITY", "X"], None) is True
    assert launched_with_wandb(["X"], None) is None  # the agent tells, from what it sees


def test_remote_runs_and_resumes_are_unbuffered_unless_the_experiment_says_otherwise():
    """Their output goes through `| tee`, where Python would block-buffer print (remote/wrapper.py LAUNCH_ENV)."""
    script = run_script(experiment=exp(), server=SERVER, run="e1", gpu_ids=[0], wandb_run_name="n", plain_env={},
                        command=("python", "t.py"))  # fmt: skip
    assert "export PYTHONUNBUFFERED=1" in script
    assert script.index("export PYTHONUNBUFFERED=1") < script.index("exec -- python t.py")
    own = run_script(experiment=exp(), server=SERVER, run="e1", gpu_ids=[0], wandb_run_name="n",
                     plain_env={"PYTHONUNBUFFERED": ""}, command=("python", "t.py"))  # fmt: skip
    assert "export PYTHONUNBUFFERED=''" in own and "PYTHONUNBUFFERED=1" not in own
