"""The kernel every package imports: errors, signals, the sidecar format, pure utilities.

A leaf: it imports nothing of ours outside itself (tests/unit/test_import_directions.py).
"""
