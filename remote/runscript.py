"""Pure construction of what a remote launch writes and runs: paths, the run script, the env file.

Every value is `shlex.quote`d and comes from validated config (workers/fleet.py). Secrets are
never part of the script or of a command line: they go into a 0600 env file the script sources.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

from trainwarden.core.redact import SECRET_KEY_RE
from trainwarden.core.sidecar import METRICS_ENV, metrics_path
from trainwarden.core.tmux import tmux_argv
from trainwarden.remote.fleet import Experiment, Server
from trainwarden.remote.wrapper import EXIT_SUFFIX, launch_env, recorded_run

OFFLINE_RE = re.compile(r"(?i)^(?:WANDB_MODE=(?:offline|disabled|dryrun)|WANDB_DISABLED=(?:true|1|yes))$")
OFFLINE_MODES = ("offline", "disabled", "dryrun")


@dataclass(frozen=True, slots=True)
class RunPaths:
    run_dir: str
    script: str
    env_file: str
    log: str
    exit_file: str
    pid_file: str
    metrics: str  # the sidecar metrics file (trainwarden.core.sidecar), given to the process as TRAINWARDEN_METRICS


def run_paths(server: Server, run: str) -> RunPaths:
    base = f"{server.work_dir.rstrip('/')}/.trainwarden/runs/{run}"
    return RunPaths(
        run_dir=base,
        script=f"{base}/run.sh",
        env_file=f"{base}/env",
        log=f"{base}/train.log",
        exit_file=f"{base}/train.log{EXIT_SUFFIX}",
        pid_file=f"{base}/pid",
        metrics=metrics_path(f"{base}/train.log"),
    )


def tmux(server: Server, *args: str) -> str:
    """A tmux command line for the server's tmux (its own socket when configured)."""
    return shlex.join(tmux_argv(server.tmux_socket, *args))


def activation(server: Server) -> str:
    """Shell that activates the server's Python environment (conda env or venv), or nothing."""
    if server.conda_env:
        return f'source "$(conda info --base)/etc/profile.d/conda.sh" && conda activate {shlex.quote(server.conda_env)}'
    if server.venv:
        return f". {shlex.quote(server.venv.rstrip('/') + '/bin/activate')}"
    return ":"


def code_dir(experiment: Experiment, server: Server) -> str:
    return experiment.code_dir or server.work_dir


def sidecar_path(experiment: Experiment, server: Server, paths: RunPaths) -> str:
    """The run's sidecar file: the experiment's own TRAINWARDEN_METRICS (from its code dir), else the default."""
    chosen = experiment.env.get(METRICS_ENV)
    if not chosen:
        return paths.metrics
    return chosen if chosen.startswith("/") else f"{code_dir(experiment, server).rstrip('/')}/{chosen}"


def wandb_guard(experiment: Experiment) -> str | None:
    """Why this experiment must not launch (W&B offline or disabled), or None. An offline run is invalid."""
    if experiment.allow_offline_wandb:
        return None
    mode = experiment.env.get("WANDB_MODE", "").lower()
    if mode in OFFLINE_MODES:
        return f"env sets WANDB_MODE={mode}"
    if experiment.env.get("WANDB_DISABLED", "").lower() in ("true", "1", "yes"):
        return "env sets WANDB_DISABLED"
    for arg in experiment.command:
        if OFFLINE_RE.match(arg):
            return f"the command sets {arg}"
    return None


def launched_with_wandb(env_names: Sequence[str], project: str | None) -> bool | None:
    """What a launch knows of its run's W&B use (`uses_wandb` in `run.launched`, `wandb: 1` to the agent), so a
    run over before the agent reads its environment is still judged as agent.wandb_use would: True when it
    exports a `WANDB_*` variable or names a W&B project; None (the agent tells) otherwise. Names only."""
    return True if project or any(name.startswith("WANDB_") for name in env_names) else None


def default_run_name(experiment: Experiment, siblings: Sequence[Experiment], today: date) -> str:
    """`<name>-<date>-<params that differ from the other experiments of the same W&B group>`."""
    group = [e for e in siblings if e.wandb.group == experiment.wandb.group and e.name != experiment.name]
    differing = [
        f"{key}{value}"
        for key, value in sorted(experiment.params.items())
        if not group or any(e.params.get(key) != value for e in group)
    ]
    return "-".join([experiment.name, today.strftime("%Y%m%d"), *differing])


def split_env(experiment: Experiment, secrets: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(plain env for the script, secret env for the 0600 file). `secrets` come from the launcher's
    environment (e.g. WANDB_API_KEY) and always go to the file."""
    plain: dict[str, str] = {}
    secret: dict[str, str] = dict(secrets)
    for name, value in experiment.env.items():
        (secret if SECRET_KEY_RE.match(name) else plain)[name] = value
    return plain, secret


def env_file(secret: Mapping[str, str]) -> str:
    return "".join(f"{name}={shlex.quote(value)}\n" for name, value in sorted(secret.items()))


def run_script(
    *,
    experiment: Experiment,
    server: Server,
    run: str,
    gpu_ids: Sequence[int],
    wandb_run_name: str,
    plain_env: Mapping[str, str],
    command: Sequence[str],
) -> str:
    paths = run_paths(server, run)
    q = shlex.quote
    exports = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in gpu_ids),
        "TRAINWARDEN_RUN": run,
        METRICS_ENV: paths.metrics,  # where trainwarden.log writes; the experiment's env may name another file
        **({"WANDB_PROJECT": experiment.wandb.project} if experiment.wandb.project else {}),
        **({"WANDB_RUN_GROUP": experiment.wandb.group} if experiment.wandb.group else {}),
        **({"WANDB_ENTITY": experiment.wandb.entity} if experiment.wandb.entity else {}),
        "WANDB_RUN_NAME": wandb_run_name,
        **launch_env(plain_env),
    }
    lines = [
        "#!/usr/bin/env bash",
        f"# Generated by trainwarden for run {run}; relaunching regenerates it.",
        f"RUN_DIR={q(paths.run_dir)}",
        'echo $$ > "$RUN_DIR/pid"',
        'if [ -f "$RUN_DIR/env" ]; then set -a; . "$RUN_DIR/env"; set +a; fi',
        *(f"export {name}={q(value)}" for name, value in exports.items()),
        f"{activation(server)} || {{ echo 'trainwarden: cannot activate the environment' | tee -a"
        ' "$RUN_DIR/train.log"; echo 97 > "$RUN_DIR/train.log.exit"; exit 97; }',
        f"cd {q(code_dir(experiment, server))} || {{ echo 'trainwarden: cannot cd to the code dir' | tee -a"
        ' "$RUN_DIR/train.log"; echo 98 > "$RUN_DIR/train.log.exit"; exit 98; }',
        *recorded_run(shlex.join(command), log=paths.log, exit_file=paths.exit_file),
        "",
    ]
    return "\n".join(lines)
