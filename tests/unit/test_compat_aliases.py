"""The import paths training scripts were given before the SDK moved to trainwarden.sdk keep working.

relayout: keep (scripts/relayout.py must not rewrite the old names this test imports)
"""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("framework", ["hf", "lightning"])
def test_the_old_callback_paths_are_the_sdk_callbacks(framework: str) -> None:
    old = importlib.import_module(f"trainwarden.integrations.{framework}")
    new = importlib.import_module(f"trainwarden.sdk.integrations.{framework}")
    assert old.TrainwardenCallback is new.TrainwardenCallback


def test_trainwarden_log_and_init_are_the_sdk_ones() -> None:
    from trainwarden.sdk import log

    import trainwarden

    assert trainwarden.log is log.log and trainwarden.init is log.init
