import gc
import os
import signal
import weakref

import pytest

from scheduler.cmd import common


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


class Node:
    pass


class SignalledService:
    """Asks to be stopped as soon as it started; records what happened."""

    def __init__(self):
        self.events = []

    def start(self):
        self.events.append("start")
        os.kill(os.getpid(), signal.SIGTERM)

    def stop(self):
        self.events.append(("stop", gc.get_freeze_count() > 0, gc.get_threshold()[0]))


def test_a_service_runs_until_signalled_then_stops_with_start_up_objects_out_of_collections(restored_gc):
    service = SignalledService()
    common.run_until_signalled([service])
    assert service.events == ["start", ("stop", True, common.YOUNG_COLLECTION_EVERY)]


def test_cycles_made_after_start_up_are_still_collected(restored_gc):
    common.settle_garbage_collector()
    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    gc.collect()
    assert gone() is None
