"""The agent loop's hold on its host's lease, on a real Redis: an agent that started while Redis was away, or
whose lease lapsed in an outage, takes it once Redis answers, unless another agent holds it (then it stands
down). The fault test with real processes is tests/faults/test_agent_disk_full.py (a restart while Redis
refuses writes) and tests/faults/test_one_agent.py (two agents)."""

import time

import pytest
from trainwarden.events.agent_lease import LeaseKeeper, agent_lease
from trainwarden.events.errors import LeaseLost

pytestmark = pytest.mark.redis


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_that_lapsed_in_an_outage_is_taken_again_if_nobody_took_it(store):
    lease = agent_lease(store.redis, store.keys, "gpu1", ttl_s=0.3)
    assert lease.acquire().mine
    clock = Clock()
    keeper = LeaseKeeper(lease, clock=clock)
    time.sleep(0.5)  # Redis away past the TTL: the lease lapsed, nobody took it
    clock.now = 10.0
    keeper.keep()  # no LeaseLost: taken again
    assert lease.token is not None and lease.held


def test_an_agent_started_in_an_outage_takes_the_free_lease_and_stands_down_for_a_holder(store):
    clock = Clock()
    alone = agent_lease(store.redis, store.keys, "gpu1", ttl_s=15)
    keeper = LeaseKeeper(alone, clock=clock)  # stand_by(unheld_in_outage=True) let it start without the lease
    clock.now = 2.0
    keeper.keep()
    assert alone.token is not None
    alone.release()

    other = agent_lease(store.redis, store.keys, "gpu1", ttl_s=15)
    assert other.acquire().mine  # another agent took the host meanwhile
    late = agent_lease(store.redis, store.keys, "gpu1", ttl_s=15)
    keeper = LeaseKeeper(late, clock=clock)
    clock.now = 4.0
    with pytest.raises(LeaseLost, match="holds the agent/gpu1 lease; this one stands down"):
        keeper.keep()
