"""A real sshd on 127.0.0.1 and a fake GPU server behind it: a venv whose bin/ holds stub
`nvidia-smi` and `wandb`, and a stub `torch` whose device count the test controls."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from trainwarden.remote.fleet import Experiment, Fleet, Server, WandbConfig
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.ssh import SshPool
from trainwarden.remote.stop import tmux_argv

from tests.sshd import SshServer

TRAIN = textwrap.dedent(
    """\
    import os, signal, sys, time
    STUBBORN = bool(os.environ.get("IGNORE_SIGINT"))  # a hung run: ignores Ctrl-C and a closed pipe
    if STUBBORN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def say(text):
        try:
            print(text, flush=True)
        except OSError:
            if not STUBBORN:
                raise

    def wait_for_peers():
        # BARRIER=a,b: finish only once every named run has started (proves they ran at once).
        names = [n for n in os.environ.get("BARRIER", "").split(",") if n]
        deadline = time.time() + 60
        while not all(os.path.exists(f"started_{n}") for n in names):
            if time.time() > deadline:
                sys.exit(4)
            time.sleep(0.05)

    open(f"started_{os.environ.get('TRAINWARDEN_RUN')}", "w").close()
    say(f"argv {sys.argv[1:]} gpus {os.environ.get('CUDA_VISIBLE_DEVICES')}")
    say(f"env {os.environ.get('ODD_VALUE')} wandb {os.environ.get('WANDB_RUN_NAME')}")
    step = int(os.environ.get("START_STEP", "1"))
    try:
        while step < 100000:
            say(f"step={step} loss={4.0 / step:.4f}")
            if os.path.exists("STOP_FLAG"):
                sys.exit(0)
            if step == int(os.environ.get("FAIL_AT", "0")):
                sys.exit(3)
            if step == int(os.environ.get("FINISH_AT", "0")):
                wait_for_peers()
                sys.exit(0)
            step += 1
            time.sleep(float(os.environ.get("STEP_S", "0.05")))
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(130)
    """
)


@dataclass
class FakeGpuServer:
    root: Path
    server: Server
    code: Path
    venv: Path

    def set_gpu_count(self, n: int) -> None:
        (self.venv / "gpu_count").write_text(str(n))

    def set_busy(self, *lines: str) -> None:
        (self.venv / "busy").write_text("".join(f"{line}\n" for line in lines))


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture
def gpu_server(sshd: SshServer, tmp_path: Path) -> Iterator[FakeGpuServer]:
    root = tmp_path / "server"
    work, venv = root / "work", root / "venv"
    code = work  # experiments run in the work dir unless they set code_dir
    code.mkdir(parents=True)
    (code / "train.py").write_text(TRAIN)
    (venv / "bin").mkdir(parents=True)
    (venv / "site" / "torch").mkdir(parents=True)
    count_file = str(venv / "gpu_count")
    (venv / "site" / "torch" / "__init__.py").write_text(
        f"class cuda:\n    @staticmethod\n    def device_count():\n        return int(open({count_file!r}).read())\n"
    )
    (venv / "bin" / "activate").write_text(f"export PATH={venv / 'bin'}:$PATH\nexport PYTHONPATH={venv / 'site'}\n")
    stubs = {
        "python": f'#!/bin/sh\nexec {sys.executable} "$@"\n',
        "nvidia-smi": textwrap.dedent(f"""\
            #!/bin/sh
            case "$*" in
              *query-gpu*) printf '0, GPU-aaaa\\n1, GPU-bbbb\\n' ;;
              *query-compute-apps*) cat {venv / 'busy'} ;;
              *) echo "NVIDIA-SMI stub" ;;
            esac
            """),
        "wandb": '#!/bin/sh\n[ "$WANDB_API_KEY" = "good-key-0123456789" ] && exit 0\n'
                 'echo "wandb: ERROR API key not configured" >&2; exit 1\n',
    }  # fmt: skip
    for name, body in stubs.items():
        (venv / "bin" / name).write_text(body)
        (venv / "bin" / name).chmod(0o755)
    socket = f"tw-remote-{uuid.uuid4().hex[:8]}"
    fake = FakeGpuServer(
        root=root,
        code=code,
        venv=venv,
        server=Server(
            name="gpu1",
            host="127.0.0.1",
            port=sshd.port,
            user=sshd.user,
            key_file=sshd.user_key,
            known_hosts=sshd.known_hosts,
            gpus=(0, 1),
            work_dir=str(work),
            venv=str(venv),
            tmux_socket=socket,
            min_free_gb=0.001,
            connect_timeout_s=5,
        ),
    )
    fake.set_gpu_count(2)
    fake.set_busy()
    yield fake
    subprocess.run(tmux_argv(socket, "kill-server"), capture_output=True, check=False)


@pytest.fixture
def pool() -> Iterator[SshPool]:
    p = SshPool()
    yield p
    p.close()


def experiment(name: str = "exp01", **kw: object) -> Experiment:
    base: dict[str, object] = {
        "name": name, "server": "gpu1", "command": ("python", "train.py"), "gpus": 1,
        "wandb": WandbConfig(project="proj", group="g1"), "stop_grace_s": 5.0,
    }  # fmt: skip
    base.update(kw)
    return Experiment(**base)  # type: ignore[arg-type]


def launcher(pool: SshPool, store, gpu_server: FakeGpuServer, *experiments: Experiment,
             key: str = "good-key-0123456789") -> RemoteLauncher:  # fmt: skip
    fleet = Fleet(servers={"gpu1": gpu_server.server}, experiments={e.name: e for e in experiments})
    return RemoteLauncher(shell=pool, store=store, fleet=fleet, host="ctl", secrets={"WANDB_API_KEY": key})


def write_servers_file(gpu_server: FakeGpuServer, path: Path) -> Path:
    """servers.yaml naming the test's sshd as server gpu1, as a user would write it for the CLI."""
    s = gpu_server.server
    path.write_text(yaml.safe_dump({"servers": [{
        "name": s.name, "host": s.host, "port": s.port, "user": s.user, "key_file": str(s.key_file),
        "known_hosts": str(s.known_hosts), "gpus": list(s.gpus), "work_dir": s.work_dir, "venv": s.venv,
        "tmux_socket": s.tmux_socket, "min_free_gb": 0.001,
    }]}))  # fmt: skip
    return path
