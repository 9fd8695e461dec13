"""Optional packages and the extra that installs each. The base install is what the agent needs; a
command that needs a package its install lacks stops with one line naming the extra to install."""

from __future__ import annotations

import importlib

from trainwarden.core.errors import ConfigError

EXTRA_OF = {
    "rq": "server",
    "asyncssh": "server",
    "matplotlib": "server",
    "slack_bolt": "bot",
    "slack_sdk": "bot",
    "waitress": "bot",
    "pynvml": "gpu",
    "wandb": "wandb",
    "tensorboard": "tensorboard",
    "prometheus_client": "metrics",
    "mcp": "mcp",
}
# Imported through the module that wraps it: asyncssh through remote/ssh.py, which drops the warning
# cryptography 47+ gives when asyncssh is imported (noise on every daemon's stderr, an error under pytest).
IMPORTED_THROUGH = {"asyncssh": "trainwarden.remote.ssh"}


class MissingExtra(ConfigError):
    """A command needs an optional package that is not installed: the message says which extra has it."""

    def __init__(self, command: str, module: str) -> None:
        self.command, self.module = command, module
        super().__init__(f"trainwarden {command} needs {module}: pip install 'trainwarden[{EXTRA_OF[module]}]'")


def require(command: str, *modules: str) -> None:
    """Import each optional package `command` needs (they are needed next anyway); MissingExtra for the
    first one missing. A package that is there but lacks one of its own dependencies is a broken
    install, not a missing extra: that error is left as it is."""
    for module in modules:
        try:
            importlib.import_module(IMPORTED_THROUGH.get(module, module))
        except ModuleNotFoundError as exc:
            if exc.name is not None and exc.name.partition(".")[0] != module:
                raise
            raise MissingExtra(command, module) from None
