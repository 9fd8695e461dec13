"""The catalogue of fault signatures (faults/): every declared sample line goes through the agent's own
tagging and comes out with its signature's tag and words; every look-alike stays clear of it; and the default
policy turns a fault into one anomaly naming its cause, with the signature's remedy, that a later number in the
log does not resolve.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from trainwarden.agent.parse import fault_of, tag_of
from trainwarden.events import types as t
from trainwarden.faults import logtags
from trainwarden.faults.words import describe, remedy
from trainwarden.policies.default import default_policy

from tests.policy_helpers import Clock, run
from trainwarden import faults

SAMPLES = [(s, sample) for s in faults.REGISTRY for sample in s.samples]
NOT_SAMPLES = [(s, line) for s in faults.REGISTRY for line in s.not_samples]


def test_every_signature_is_declared_with_its_source_and_a_real_sample():
    for s in faults.REGISTRY:
        assert s.samples, f"{s.id}: no sample line"
        assert s.source.repo and s.source.path and s.source.string, s.id  # a repository, or the vendor catalogue
        assert s.severity in {"info", "warning", "critical"}, s.id
        assert s.remedy and s.what, s.id
        assert s.stage in faults.STAGES, s.id
        assert s.tag in faults.TAGS, s.id


@pytest.mark.parametrize(("signature", "sample"), SAMPLES, ids=[f"{s.id}-{i}" for i, (s, _) in enumerate(SAMPLES)])
def test_a_sample_line_is_tagged_and_said_by_its_signature(signature, sample):
    assert fault_of(sample.line) == signature.tag, sample.line
    assert any(hint in sample.line for hint in signature.hints), "the cheap pre-check would skip it"
    assert faults.signature_of(sample.line, signature.tag) is signature
    assert describe(signature.tag, sample.line) == (sample.said or signature.what)
    assert remedy(signature.tag, sample.line) == signature.remedy


@pytest.mark.parametrize(("signature", "line"), NOT_SAMPLES, ids=[s.id for s, _ in NOT_SAMPLES])
def test_a_look_alike_line_is_not_that_signature(signature, line):
    assert faults.signature_of(line) is not signature
    assert tag_of(line) != signature.tag or faults.signature_of(line, signature.tag) is not signature


def test_the_agents_tags_are_the_catalogues():
    assert logtags.FAULTS == faults.TAGS
    assert [tag for tag, _ in logtags.NOTABLE][: len(faults.TAGS)] == list(faults.TAGS)


@pytest.mark.parametrize(
    ("line", "tag", "words"),
    [
        # a CPU allocator OOM (torch 2.13 here, asking for 4 EiB) is an OOM, not a generic traceback
        (
            "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 4611686018427387904 bytes. Error code 12 (Cannot allocate memory)",
            "oom",
            "out of memory (host)",
        ),
        ("OSError: [Errno 28] No space left on device", "disk_full", "disk full"),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc", "ECC"),
    ],
)
def test_the_faults_the_issue_names_are_recognised(line, tag, words):
    assert fault_of(line) == tag
    assert words in (describe(tag, line) or "")


def _opened(events) -> list[dict]:
    return [d for typ, d in run(default_policy(), events) if typ == t.ANOMALY_OPENED]


def test_a_fault_is_not_resolved_by_an_unrelated_number_and_carries_its_signatures_remedy():
    c = Clock()
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    events = [c.metric(5, loss=1.0), c.log(6, oom), c.metric(7, local_rank=0)]
    out = run(default_policy(), events)
    opened = [d for typ, d in out if typ == t.ANOMALY_OPENED]
    assert [d["rule"] for d in opened] == ["log-oom"]
    assert opened[0]["remedy"] == faults.signature_of(oom, "oom").remedy
    assert not [d for typ, d in out if typ == t.ANOMALY_RESOLVED]


def test_the_follow_on_of_a_fault_folds_into_its_cause():
    c = Clock()
    ecc = "[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered"
    sigterm = "W1204 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 77 closing signal SIGTERM"
    killed = "torch.distributed.elastic.multiprocessing.api: Signal 15 (SIGTERM) received by PID 76"
    opened = _opened([c.metric(1, loss=1.0), c.log(2, ecc), c.log(3, sigterm), c.log(4, killed)])
    assert [d["rule"] for d in opened] == ["log-ecc"]


def test_the_committed_catalogue_doc_is_what_the_script_writes():
    root = Path(__file__).resolve().parents[2]
    made = subprocess.run([sys.executable, str(root / "scripts" / "fault_catalogue.py")], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert (root / "docs" / "faults.md").read_text() == made, (
        "regenerate: python scripts/fault_catalogue.py > docs/faults.md"
    )
