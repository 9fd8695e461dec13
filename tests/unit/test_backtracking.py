"""The check that keeps a catastrophically backtracking `log_pattern` out of a policy (policies/backtracking.py),
on the ReDoS shapes and on the patterns real policies use."""

import re
import time

import pytest
from trainwarden.policies.backtracking import catastrophic
from trainwarden.policies.default import default_policy


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a*)*", r"(\w+\s?)*$", r"(.*)*x", r"^(\s*\w+)*$", r"(a|aa)*b",
                                     r"(\d|\d\d)+$", r"((ab)+c?)*"])  # fmt: skip
def test_nested_and_overlapping_repeats_are_refused(pattern):
    assert catastrophic(pattern) is not None


@pytest.mark.parametrize("pattern", [r"CUDA out of memory", r"(?i)nccl.*timeout", r"\bloss[:=]\s*nan", r"(ab)+",
                                     r"x{1,3}", r"(?:error|warn)+", r"(\w+)\s+(\d+)", r"Xid \(PCI:[\w:.]+\): \d+",
                                     r"[\w\s]*$", r"(?:a|b)*c"])  # fmt: skip
def test_ordinary_patterns_pass(pattern):
    assert catastrophic(pattern) is None


def test_a_refused_shape_really_is_slow_and_its_rewrite_is_not():
    """The reason the check exists, measured on a short line: 22 characters take the bad form seconds."""
    line = "a" * 22 + "!"
    started = time.perf_counter()
    re.search(r"^(\w+\s?)*$", line)
    slow = time.perf_counter() - started
    started = time.perf_counter()
    re.search(r"^[\w\s]*$", line)
    fast = time.perf_counter() - started
    assert slow > 50 * fast  # a ratio in one run, not a timing


def test_no_pattern_of_the_default_policy_is_refused():
    assert default_policy().rules  # it loads: every log_pattern passed the check
