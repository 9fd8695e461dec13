"""Preflight (the seed's Step 1): check the server before a launch; each check is a remote command
plus a pure judge of its output, so the judging is testable without a server.

Each failure says its own cause and fix: a check that needs another (`needs`) is skipped when that one
failed (a missing env is not also a failed `wandb login`), a command the server lacks (exit 127) gets the
check's `missing` remedy, and no check writes on the server (a failed preflight leaves nothing behind).
The W&B guard is the one `launch` applies (`wandb_guard_result`), so preflight passes what launch takes."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from trainwarden.remote.fleet import Experiment, Server
from trainwarden.remote.runscript import activation, code_dir, wandb_guard
from trainwarden.remote.ssh import CommandResult, RemoteShell

Judge = Callable[[CommandResult], tuple[bool, str]]
CHECK_TIMEOUT_S = 60.0
NOT_FOUND = 127  # the shell's exit status for a command it cannot find
WANDB_GUARD = "wandb_guard"
GUARD_REMEDY = (
    "remove WANDB_MODE=offline/disabled (an offline run is invalid), or set allow_offline_wandb: true in the experiment"
)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    command: str
    judge: Judge
    remedy: str
    stdin: str | None = None  # secrets travel here, never on a command line
    needs: tuple[str, ...] = ()  # checks that must pass first; skipped (not failed) when one did not
    missing: str | None = None  # the fix when the server lacks the command (exit 127)


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    remedy: str
    skipped: bool = False  # not run: a check it needs failed (that one's failure says the cause)

    @property
    def failed(self) -> bool:
        return not self.ok and not self.skipped


def wandb_guard_result(experiment: Experiment) -> CheckResult:
    """The W&B guard as a check: the one decision that `preflight` reports and `launch` refuses on."""
    reason = wandb_guard(experiment)
    if reason is None:
        allowed = "offline allowed (allow_offline_wandb)" if experiment.allow_offline_wandb else "W&B not offline"
        return CheckResult(WANDB_GUARD, True, allowed, "")
    return CheckResult(WANDB_GUARD, False, f"W&B would not record this run ({reason}); an offline run is invalid",
                       GUARD_REMEDY)  # fmt: skip


def _exit_ok(what: str, failed: str | None = None) -> Judge:
    """Passes on exit 0; a failure says what the command printed, else `failed` (never a bare exit status
    when a cause can be named)."""

    def judge(result: CommandResult) -> tuple[bool, str]:
        if result.ok:
            return True, what
        said = (result.stderr or result.stdout).strip()[-300:]
        return False, said or failed or f"exit status {result.exit_status}"

    return judge


def judge_torch(gpu_ids: Sequence[int]) -> Judge:
    need = max(gpu_ids) + 1 if gpu_ids else 0

    def judge(result: CommandResult) -> tuple[bool, str]:
        if not result.ok:
            return False, (result.stderr.strip().splitlines() or [f"exit status {result.exit_status}"])[-1]
        try:
            count = int(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return False, f"unexpected output: {result.stdout.strip()[:200]!r}"
        if count < need:
            return False, f"torch sees {count} GPU(s), GPU ids {list(gpu_ids)} need {need}"
        return True, f"torch sees {count} GPU(s)"

    return judge


def judge_gpus_free(gpu_ids: Sequence[int]) -> Judge:
    """Parse `nvidia-smi --query-gpu=index,uuid` and `--query-compute-apps=gpu_uuid,pid,process_name`."""

    def judge(result: CommandResult) -> tuple[bool, str]:
        if not result.ok:
            return False, (result.stderr or result.stdout).strip()[-300:] or "nvidia-smi failed"
        gpus_part, _, apps_part = result.stdout.partition("---")
        index_of: dict[str, int] = {}
        for line in gpus_part.strip().splitlines():
            index, _, uuid = (part.strip() for part in line.partition(","))
            if index.isdigit():
                index_of[uuid] = int(index)
        missing = [i for i in gpu_ids if i not in index_of.values()]
        if missing:
            return False, f"nvidia-smi does not list GPU(s) {missing} (it has {sorted(index_of.values())})"
        busy = []
        for line in apps_part.strip().splitlines():
            fields = [part.strip() for part in line.split(",")]
            if len(fields) >= 2 and index_of.get(fields[0]) in gpu_ids:
                name = fields[2] if len(fields) > 2 else "?"
                busy.append(f"GPU {index_of[fields[0]]} (pid {fields[1]} {name})")
        if busy:
            return False, "busy: " + ", ".join(busy)
        return True, f"GPU(s) {list(gpu_ids)} free"

    return judge


def judge_disk(min_free_gb: float) -> Judge:
    def judge(result: CommandResult) -> tuple[bool, str]:
        lines = result.stdout.strip().splitlines()
        if not result.ok or len(lines) < 2:
            return False, (result.stderr or result.stdout).strip()[-300:] or "df failed"
        try:
            free_gb = int(lines[-1].split()[3]) / 1024**2
        except (ValueError, IndexError):
            return False, f"unexpected df output: {lines[-1]!r}"
        if free_gb < min_free_gb:
            return False, f"{free_gb:.1f} GB free, {min_free_gb:g} GB required"
        return True, f"{free_gb:.1f} GB free"

    return judge


def preflight_checks(
    experiment: Experiment, server: Server, gpu_ids: Sequence[int], secrets: Mapping[str, str]
) -> list[Check]:
    act = activation(server)
    where = code_dir(experiment, server)
    out_dir = experiment.checkpoints.dir if experiment.checkpoints else where
    env_fix = "create the conda env / venv on the server, or fix conda_env / venv in servers.yaml"
    checks = [
        Check("code_dir", f"test -d {shlex.quote(where)}", _exit_ok(f"{where} exists", f"{where} does not exist on "
              f"{server.name}"), f"put the code at {where} on {server.name}, or fix code_dir / work_dir"),
        Check("python_env", act, _exit_ok("environment activates", f"`{act}` failed"), env_fix),
    ]  # fmt: skip
    if gpu_ids:
        checks += [
            Check("torch_gpus", f"{act} && python -c 'import torch; print(torch.cuda.device_count())'",
                  judge_torch(gpu_ids), "install a CUDA build of torch in the env and check the NVIDIA driver",
                  needs=("python_env",), missing="the env has no `python`: " + env_fix),
            Check("gpus_free", f"{act} && nvidia-smi --query-gpu=index,uuid --format=csv,noheader && echo --- && "
                               "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name --format=csv,noheader",
                  judge_gpus_free(gpu_ids), "pick free GPUs (or wait for the runs on them to end)",
                  needs=("python_env",), missing=f"install the NVIDIA driver (nvidia-smi) on {server.name}, or "
                  "set gpus: 0 for a run without GPUs"),
        ]  # fmt: skip
    guard = wandb_guard_result(experiment)
    if not experiment.allow_offline_wandb and guard.ok:  # an offline experiment: the guard's failure says it
        exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in sorted(secrets.items()))
        checks.append(
            Check("wandb_login", "bash -s", _exit_ok("W&B key verified"),
                  "run `wandb login` on the server or set WANDB_API_KEY where trainwarden runs",
                  stdin=f"{exports}{act} && wandb login --verify\n", needs=("python_env",),
                  missing="install wandb in the env (pip install wandb)")
        )  # fmt: skip
    # df on the nearest directory that exists: the checkpoint dir is created by the launch, not by a check
    nearest = f'd={shlex.quote(out_dir)}; while [ ! -d "$d" ]; do d=$(dirname "$d"); done; df -Pk "$d"'
    checks.append(
        Check("disk", nearest, judge_disk(server.min_free_gb),
              f"free space under {out_dir}: `trainwarden checkpoints EXP --apply` deletes old checkpoints "
              "(dry run without --apply), or lower min_free_gb")
    )  # fmt: skip
    return checks


def run_checks(shell: RemoteShell, server: Server, checks: Sequence[Check]) -> list[CheckResult]:
    results: list[CheckResult] = []
    for check in checks:
        failed = [r.name for r in results if r.name in check.needs and not r.ok]
        if failed:
            results.append(CheckResult(check.name, False, f"not checked: {', '.join(failed)} failed first", "",
                                       skipped=True))  # fmt: skip
            continue
        outcome = shell.run(server, check.command, timeout=CHECK_TIMEOUT_S, stdin=check.stdin)
        ok, detail = check.judge(outcome)
        remedy = check.missing if outcome.exit_status == NOT_FOUND and check.missing else check.remedy
        results.append(CheckResult(check.name, ok, detail, "" if ok else remedy))
    return results
