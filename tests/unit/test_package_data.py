"""The default policy is package data of `trainwarden.policies`, found from any working directory.

Run from the checkout, the top-level folder `policies/` is importable as `policies` too, which hid a lookup
by the folder's name; a subprocess in an empty directory sees only the installed namespace.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_default_policy_loads_outside_the_checkout(tmp_path: Path) -> None:
    code = "from trainwarden.policies.default import default_policy; print(len(default_policy().rules))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0
