"""Kept for compatibility: the callbacks moved to `trainwarden.sdk.integrations` (issue #25, decision 0034).

`from trainwarden.integrations.hf import TrainwardenCallback` (and `.lightning`), the paths training scripts
were told to use, keep working through the two alias modules here; new code imports trainwarden.sdk.integrations.
relayout: keep (scripts/relayout.py leaves this package's old names as they are)
"""
