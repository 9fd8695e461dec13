"""The policy used when none is configured: `default.yaml`, shipped as package data."""

from __future__ import annotations

from functools import cache
from importlib import resources

from trainwarden.policies.loader import load_policy
from trainwarden.policies.model import Policy

DEFAULT_SOURCE = "policies/default.yaml"


def default_policy_text() -> str:
    return resources.files("trainwarden.policies").joinpath("default.yaml").read_text(encoding="utf-8")


@cache
def default_policy() -> Policy:
    return load_policy(default_policy_text(), source=DEFAULT_SOURCE)
