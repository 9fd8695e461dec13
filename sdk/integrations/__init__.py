"""Callbacks that write a trainer's metrics to the run's sidecar file (trainwarden.sdk.log).

Each module imports its framework when it is imported itself, never before: `trainwarden` works
without transformers or Lightning, and `pip install 'trainwarden[hf]'` / `'trainwarden[lightning]'`
brings the one a script uses. Without its framework a module still imports (its callback is then
a plain class, of use only to a test), so no import of it fails where the framework is absent.
"""

from __future__ import annotations

import importlib


def bases(*names: tuple[str, str]) -> tuple[type, ...]:
    """The classes `(module, attribute)` that are importable here, else `(object,)`."""
    found: list[type] = []
    for module, attribute in names:
        try:
            found.append(getattr(importlib.import_module(module), attribute))
        except ImportError:
            continue
    return tuple(found) or (object,)
