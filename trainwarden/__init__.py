"""trainwarden: an event-sourced watchdog for ML training runs.

One import namespace: the repository's top-level folders are installed as subpackages of this one
(`events/` as `trainwarden.events`, `agent/` as `trainwarden.agent`, ...; the map is in setup.py),
so a wheel installs no top-level name but `trainwarden`.

`trainwarden.log(step=..., **metrics)` and `trainwarden.init(path=...)` are for training scripts
(trainwarden.sdk.log): this file imports nothing else, so `import trainwarden` stays cheap there.
"""

from pathlib import Path

_here = Path(__file__).parent
if not (_here / "events").is_dir() and (_here.parent / "events" / "__init__.py").is_file():
    # Imported from a checkout (its root first on sys.path, as `python -m` and pytest put it) rather
    # than from the installed package: the sibling folders are then this package's subpackages.
    __path__.append(str(_here.parent))

from trainwarden.sdk.log import init, log  # noqa: E402 - after the path set-up above

__all__ = ["init", "log"]
