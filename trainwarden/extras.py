"""Optional packages and the extra that installs each. The base install is what the agent needs; a
command that needs a package its install lacks stops with one line naming the extra to install."""

from __future__ import annotations

import importlib
import warnings

from trainwarden.errors import ConfigError

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
}

# cryptography 47+ deprecates DSA, which asyncssh touches when it is imported: a warning on every daemon's
# stderr (and an error under pytest's filters) that no user can act on. Matched by message: importing
# cryptography's warning class to name it would cost every command that import.
IMPORT_NOISE = "DSA is deprecated"


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
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=IMPORT_NOISE)
                importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and exc.name.partition(".")[0] != module:
                raise
            raise MissingExtra(command, module) from None
