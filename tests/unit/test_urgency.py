"""Which events take the workers' fast lane (events/urgency.py): pure, table-driven."""

import math

import pytest
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.urgency import is_urgent, urgency_marks
from trainwarden.faults import REGISTRY

from tests.helpers import metric, nan_metric


def event(kind, **data):
    return make_event(kind, run="exp01", host="gpu1", producer="gpu1/x/exp01/g0", seq=1, data=data, ts=1000.0)


@pytest.mark.parametrize(
    ("case", "urgent"),
    [
        (metric("exp01", 1, step=1, loss=2.0, lr=3e-4), False),
        (nan_metric("exp01", 1), True),
        (metric("exp01", 1, step=1, loss=2.0, grad_norm=math.inf), True),
        (metric("exp01", 1, step=1, loss=-math.inf), True),
        (metric("exp01", 1, step=1, eval={"loss": math.nan}), True),  # a trainer's group of values
        (metric("exp01", 1, step=1, loss=2.0, note="nan"), False),  # a string is not a value
        (event(t.RUN_FAILED, exit_code=1), True),
        (event(t.RUN_FINISHED, exit_code=0), False),
        (event(t.STOP_REQUESTED, by="slack", user="U1", reason="diverged"), True),
        (event(t.STOP_REQUESTED, by="policy", rule="loss-nonfinite", reason="NaN"), False),  # the workers' own
        (
            event(t.LOG_LINE, tag="oom", line="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"),
            True,
        ),
        (event(t.LOG_LINE, tag="traceback", line="Traceback (most recent call last):"), False),
        (event(t.LOG_LINE, tag="oom", line="an unrelated line"), False),  # the tag alone proves nothing
        (
            event(t.GPU_XID, gpu=0, uuid="u", xid=79, meaning="fallen off the bus", severity="critical", mapped=True),
            True,
        ),
        (
            event(t.GPU_XID, gpu=0, uuid="u", xid=45, meaning="preemptive cleanup", severity="warning", mapped=True),
            False,
        ),
        (event(t.GPU, gpu=0, util=0.0), False),
        (event(t.TICK), False),
    ],
)
def test_is_urgent(case, urgent):
    assert is_urgent(case) is urgent


def test_a_fault_line_is_urgent_exactly_when_its_signature_is_critical():
    for signature in REGISTRY:
        for sample in signature.samples:
            line = event(t.LOG_LINE, tag=signature.tag, line=sample.line)
            assert is_urgent(line) is (signature.severity == "critical"), (signature.id, sample.line)


def test_urgency_marks_are_one_per_event_and_empty_when_none_is_urgent():
    calm = [metric("exp01", i, step=i, loss=2.0) for i in range(1, 4)]
    assert urgency_marks(calm) == ""
    assert urgency_marks([*calm, nan_metric("exp01", 4)]) == "0001"
    assert urgency_marks([]) == ""
