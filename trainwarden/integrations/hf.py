"""Kept for compatibility: `trainwarden.integrations.hf` is `trainwarden.sdk.integrations.hf`.

relayout: keep (scripts/relayout.py leaves this old name as it is)
"""

from trainwarden.sdk.integrations.hf import TrainwardenCallback

__all__ = ["TrainwardenCallback"]
