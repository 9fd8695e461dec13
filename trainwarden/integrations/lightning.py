"""Kept for compatibility: `trainwarden.integrations.lightning` is `trainwarden.sdk.integrations.lightning`.

relayout: keep (scripts/relayout.py leaves this old name as it is)
"""

from trainwarden.sdk.integrations.lightning import TrainwardenCallback

__all__ = ["TrainwardenCallback"]
