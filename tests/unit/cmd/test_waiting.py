"""berth boot --wait and delete --wait poll only for the instances not settled yet."""

import pytest

from berth_contract.request_spec import MAX_LIST
from scheduler.cmd import waiting
from scheduler.cmd.arguments import CommandError


class Scheduler:
    """Answers list_instances from ``states`` ({uuid: [state per poll, ...]}), recording each ask."""

    def __init__(self, states):
        self.states = states
        self.asked = []

    def list_instances(self, ctxt, include_deleted=False, uuids=None):
        self.asked.append(list(uuids))
        polls = len(self.asked)
        return [{"uuid": u, "state": self.states[u][min(polls, len(self.states[u])) - 1]}
                for u in uuids if u in self.states]


def test_each_poll_asks_only_for_the_instances_not_settled_yet():
    scheduler = Scheduler({"a": ["SCHEDULED", "ACTIVE"], "b": ["ACTIVE"],
                           "c": ["SCHEDULED", "SCHEDULED", "ERROR"]})
    found = waiting.wait_for(scheduler, ["a", "b", "c", "a"], timeout=5)
    assert {u: i["state"] for u, i in found.items()} == {"a": "ACTIVE", "b": "ACTIVE", "c": "ERROR"}
    assert scheduler.asked == [["a", "b", "c"], ["a", "c"], ["c"]]


def test_more_instances_than_one_list_holds_are_asked_for_a_page_at_a_time():
    uuids = [f"u{i}" for i in range(MAX_LIST + 5)]
    scheduler = Scheduler({u: ["ACTIVE"] for u in uuids})
    assert len(waiting.wait_for(scheduler, uuids, timeout=5)) == len(uuids)
    assert [len(page) for page in scheduler.asked] == [MAX_LIST, 5]


def test_an_instance_that_never_appears_times_out_naming_the_wait():
    scheduler = Scheduler({"a": ["ACTIVE"]})
    with pytest.raises(CommandError, match="timed out after 0.3 s waiting for 2 instance"):
        waiting.wait_for(scheduler, ["a", "missing"], timeout=0.3)
