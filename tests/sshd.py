"""A real OpenSSH sshd on 127.0.0.1 and a free port, with generated host and user keys."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


class SshServer:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.user = getpass.getuser()
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.host_key = keygen(directory / "host_ed25519")
        self.user_key = keygen(directory / "user_ed25519")
        (directory / "authorized_keys").write_text((directory / "user_ed25519.pub").read_text())
        self.known_hosts = directory / "known_hosts"

    def start(self) -> SshServer:
        if not os.path.exists(SSHD):
            raise RuntimeError("sshd not found; install openssh-server (./dev.sh test does)")
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        for _ in range(5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            config = self.dir / "sshd_config"
            config.write_text(
                f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
                f"PidFile {self.dir / 'sshd.pid'}\nAuthorizedKeysFile {self.dir / 'authorized_keys'}\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
                "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nPrintMotd no\n"
                "Subsystem sftp internal-sftp\nLogLevel ERROR\nMaxSessions 50\nMaxStartups 50\n"
            )
            with open(self.dir / "sshd.log", "ab") as log:
                self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=log)
            if self._wait_ready():
                self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {(self.dir / 'host_ed25519.pub').read_text()}")
                return self
        raise RuntimeError(f"sshd did not start: {(self.dir / 'sshd.log').read_text()[-1000:]}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return True
            except OSError:
                time.sleep(0.02)
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
