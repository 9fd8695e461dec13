"""Launch and stop latency over SSH on loopback vs bare `ssh host tmux new-session / kill-session`.

A real sshd on 127.0.0.1 and a private redis-server. trainwarden's launch writes the run dir over
SFTP, starts tmux, waits for the pid and records run.launched + run.started (timed from the
experiment config to run.started); its stop is Ctrl-C, wait for exit. The bare baseline opens an
OpenSSH connection per command, as a shell script would. Median of N each, in the same run.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import private_redis
from trainwarden.events import types as t
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore
from trainwarden.remote.control import SshController
from trainwarden.remote.fleet import Experiment, Fleet, Server, WandbConfig
from trainwarden.remote.launch import RemoteLauncher
from trainwarden.remote.ssh import SshPool
from trainwarden.remote.stop import StopTarget

from tests.sshd import SshServer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tw-bench-ssh-") as d, private_redis() as redis_server:
        root = Path(d)
        sshd = SshServer(root).start()
        try:
            work = root / "work"
            work.mkdir()
            server = Server(name="local", host="127.0.0.1", port=sshd.port, user=sshd.user, key_file=sshd.user_key,
                            known_hosts=sshd.known_hosts, work_dir=str(work), tmux_socket="tw-bench")  # fmt: skip
            sleeper = (sys.executable, "-c", "import time; time.sleep(600)")
            experiment = Experiment(name="bench", server="local", command=sleeper, gpus=0, allow_offline_wandb=True,
                                    wandb=WandbConfig(project="p"), stop_grace_s=5)  # fmt: skip
            store = EventStore(redis_server.client(), keys=Keys())
            pool = SshPool()
            launcher = RemoteLauncher(shell=pool, store=store, fleet=Fleet(servers={"local": server},
                                      experiments={"bench": experiment}), host="bench", secrets={})  # fmt: skip
            controller = SshController(shell=pool, servers={"local": server})
            ssh = ["ssh", "-i", str(sshd.user_key), "-p", str(sshd.port), "-o", "BatchMode=yes",
                   "-o", f"UserKnownHostsFile={sshd.known_hosts}", f"{sshd.user}@127.0.0.1"]  # fmt: skip

            ours_launch, ours_stop, bare_launch, bare_stop = [], [], [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                launched = launcher.launch("bench", preflight=False)
                assert any(e.type == t.RUN_STARTED for _, e in store.iter_run("bench"))
                ours_launch.append(time.perf_counter() - start)
                target = StopTarget.from_launch("bench", launched.data, default_host="x")
                start = time.perf_counter()
                assert controller.stop(target).ok
                ours_stop.append(time.perf_counter() - start)

                start = time.perf_counter()
                cmd = shlex.join(["tmux", "-L", "tw-bench", "new-session", "-d", "-s", "bare", "sleep 600"])
                subprocess.run([*ssh, cmd], check=True)
                bare_launch.append(time.perf_counter() - start)
                start = time.perf_counter()
                subprocess.run([*ssh, "tmux -L tw-bench kill-session -t =bare"], check=True)
                bare_stop.append(time.perf_counter() - start)
            pool.close()
            subprocess.run([*ssh, "tmux -L tw-bench kill-server"], check=False, capture_output=True)
        finally:
            sshd.stop()
    ms = lambda xs: 1000 * statistics.median(xs)  # noqa: E731
    print(f"remote latency over SSH on loopback, median of {args.repeats}")
    print(
        f"  launch: trainwarden {ms(ours_launch):7.1f} ms (config -> run.started)"
        f"   bare ssh tmux new-session {ms(bare_launch):6.1f} ms   ratio {ms(ours_launch) / ms(bare_launch):.2f}"
    )
    print(
        f"  stop:   trainwarden {ms(ours_stop):7.1f} ms (Ctrl-C, wait for exit)"
        f"   bare ssh tmux kill-session {ms(bare_stop):6.1f} ms   ratio {ms(ours_stop) / ms(bare_stop):.2f}"
    )


if __name__ == "__main__":
    main()
