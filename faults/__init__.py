"""The catalogue of fault signatures: every fault line the agent recognises, declared once (faults/
model.py says what a declaration holds), in the order that makes a traceback take its most specific tag.

`REGISTRY` is the list; the agent's tags (faults/logtags.py), the words of a fault (faults/words.py), the
root-cause folding (policies/rootcause.py) and docs/faults.md are made from it. To add a fault: declare it in
the module of its family with its source and real sample lines; the tests run the samples.
"""

from __future__ import annotations

from trainwarden.faults import disk, distributed, gpu, hang, host, memory, numeric, signals
from trainwarden.faults.model import CAUSE, COLLECTIVE, STAGES, TEARDOWN, UNEXPLAINED, Signature

__all__ = ["CAUSE", "COLLECTIVE", "REGISTRY", "STAGES", "TAGS", "TEARDOWN", "UNEXPLAINED", "Signature",
           "by_id", "by_tag", "signature_of", "tag_pattern"]  # fmt: skip

# The fault tags, most specific first: a traceback block takes the first of its lines' tags in this order
# (an ECC error beats the NCCL errors it causes on other ranks, an OOM beats the SIGKILL that follows).
TAGS = (gpu.ECC, gpu.XID, memory.OOM, gpu.ILLEGAL_MEMORY, gpu.CUDA_ERROR, disk.DISK_FULL, numeric.NAN,
        distributed.NCCL, distributed.GLOO, distributed.NCCL_WARN, hang.HANG, host.KILLED, numeric.LOSS_SCALE,
        distributed.CHILD_FAILED, numeric.NAN_SKIPPED)  # fmt: skip

_ALL = (*memory.SIGNATURES, *gpu.SIGNATURES, *distributed.SIGNATURES, *hang.SIGNATURES, *host.SIGNATURES,
        *signals.SIGNATURES, *disk.SIGNATURES, *numeric.SIGNATURES)  # fmt: skip
_BY_TAG: dict[str, tuple[Signature, ...]] = {tag: tuple(s for s in _ALL if s.tag == tag) for tag in TAGS}
REGISTRY: tuple[Signature, ...] = tuple(s for tag in TAGS for s in _BY_TAG[tag])
_BY_ID = {s.id: s for s in REGISTRY}
assert len(_BY_ID) == len(_ALL) == len(REGISTRY), "a signature id is declared twice, or its tag is not in TAGS"


def by_tag(tag: str) -> tuple[Signature, ...]:
    return _BY_TAG.get(tag, ())


def by_id(signature_id: str) -> Signature | None:
    return _BY_ID.get(signature_id)


def tag_pattern(tag: str) -> str:
    """One regex for a tag: its signatures' patterns joined, each with its own flags."""
    return "|".join(s.scoped for s in _BY_TAG[tag])


def signature_of(line: str, tag: str | None = None) -> Signature | None:
    """The signature a line matches (the most specific, among `tag`'s when given), or None."""
    for signature in _BY_TAG.get(tag, ()) if tag is not None else REGISTRY:
        if signature.regex.search(line):
            return signature
    return None
