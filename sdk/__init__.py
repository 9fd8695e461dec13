"""What a training process imports: `trainwarden.log` (sdk/log.py) and the framework callbacks.

It imports only trainwarden.core and nothing heavy (tests/unit/test_sdk_import_cost.py).
"""
