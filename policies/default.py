"""The policy used when none is configured."""

from __future__ import annotations

from policies.model import Policy
from policies.rules import NonFinite


def default_policy() -> Policy:
    return Policy(name="default", rules=(NonFinite(id="loss-nonfinite"),))
