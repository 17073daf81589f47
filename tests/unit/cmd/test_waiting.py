"""The waits of berth server create --wait, delete --wait and the others: they poll only for the instances
not settled yet, tell their progress, name what a timeout left pending, and turn Ctrl-C into one
line and exit status 130."""

import io
import itertools

import pytest

from berth_contract.request_spec import MAX_LIST
from scheduler.cmd import waiting
from scheduler.cmd.arguments import CommandError, Interrupted
from tests.unit.cli_scheduler import parse, write_conf


class Scheduler:
    """Answers list_instances from ``states`` ({uuid: [state per poll, ...]}), recording each ask."""

    def __init__(self, states, hosts=None, names=None, interrupt_at=None):
        self.states = states
        self.hosts, self.names = hosts or {}, names or {}
        self.interrupt_at = interrupt_at
        self.asked = []

    def list_instances(self, ctxt, include_deleted=False, uuids=None):
        self.asked.append(list(uuids))
        polls = len(self.asked)
        if polls == self.interrupt_at:
            raise KeyboardInterrupt
        return [{"uuid": u, "state": self.states[u][min(polls, len(self.states[u])) - 1],
                 "host": self.hosts.get(u), "display_name": self.names.get(u)}
                for u in uuids if u in self.states]


def quiet():
    return waiting.Progress(io.StringIO(), tty=False)


def timing():
    """A clock one second later at each look, and a sleep that takes no time."""
    seconds = itertools.count()
    return {"clock": lambda: float(next(seconds)), "sleep": lambda _: None}


def test_each_poll_asks_only_for_the_instances_not_settled_yet():
    scheduler = Scheduler({"a": ["SCHEDULED", "ACTIVE"], "b": ["ACTIVE"],
                           "c": ["SCHEDULED", "SCHEDULED", "ERROR"]})
    found = waiting.wait_for(scheduler, ["a", "b", "c", "a"], timeout=5, progress=quiet())
    assert {u: i["state"] for u, i in found.items()} == {"a": "ACTIVE", "b": "ACTIVE", "c": "ERROR"}
    assert scheduler.asked == [["a", "b", "c"], ["a", "c"], ["c"]]


def test_more_instances_than_one_list_holds_are_asked_for_a_page_at_a_time():
    uuids = [f"u{i}" for i in range(MAX_LIST + 5)]
    scheduler = Scheduler({u: ["ACTIVE"] for u in uuids})
    assert len(waiting.wait_for(scheduler, uuids, timeout=5, progress=quiet())) == len(uuids)
    assert [len(page) for page in scheduler.asked] == [MAX_LIST, 5]


def test_an_instance_that_never_appears_times_out_naming_it():
    scheduler = Scheduler({"a": ["ACTIVE"]})
    with pytest.raises(CommandError) as raised:
        waiting.wait_for(scheduler, ["a", "missing"], timeout=3, progress=quiet(), **timing())
    assert str(raised.value) == ("timed out after 3 s waiting for 1 of 2 instance(s): still missing "
                                 "not listed yet")


def test_a_timeout_names_the_first_pending_with_their_state_and_host_and_counts_the_others():
    uuids = [f"u{i}" for i in range(8)]
    states = {u: ["BUILDING"] for u in uuids[:7]} | {"u7": ["ACTIVE"]}
    scheduler = Scheduler(states, hosts={u: "h1" for u in uuids[1:]}, names={"u0": "web-0"})
    with pytest.raises(CommandError) as raised:
        waiting.wait_for(scheduler, uuids, timeout=2, progress=quiet(), **timing())
    assert str(raised.value) == (
        "timed out after 2 s waiting for 7 of 8 instance(s): still u0 (web-0) BUILDING on no host yet, "
        "u1 BUILDING on h1, u2 BUILDING on h1, u3 BUILDING on h1, u4 BUILDING on h1 and 2 more")


def test_without_a_terminal_each_instance_is_told_as_it_settles():
    scheduler = Scheduler({"a": ["SCHEDULED", "ACTIVE"], "b": ["ACTIVE"],
                           "c": ["BUILDING", "BUILDING", "ERROR"]},
                          hosts={"a": "h1", "b": "h2"}, names={"b": "web-2"})
    told = io.StringIO()
    waiting.wait_for(scheduler, ["a", "b", "c"], timeout=5, progress=waiting.Progress(told, tty=False),
                     **timing())
    assert told.getvalue() == "b (web-2) ACTIVE on h2\na ACTIVE on h1\nc ERROR\n"


def test_on_a_terminal_one_line_is_rewritten_with_the_counts_then_erased():
    scheduler = Scheduler({"a": ["BUILDING", "ACTIVE"], "b": ["ACTIVE"],
                           "c": ["SCHEDULED", "BUILDING", "ACTIVE"]})
    screen = io.StringIO()
    waiting.wait_for(scheduler, ["a", "b", "c"], timeout=60, progress=waiting.Progress(screen, tty=True),
                     **timing())
    text = screen.getvalue()
    assert "\r1/3 ACTIVE, 1 BUILDING, 1 SCHEDULED (1 s)" in text
    assert "\r2/3 ACTIVE, 1 BUILDING (2 s)" in text
    assert "\n" not in text and text.endswith("\r")  # nothing left on the screen but the listing to come
    assert text.rsplit("\r", 2)[1].strip() == ""


def test_ctrl_c_is_one_line_saying_what_is_left_and_exit_status_130():
    scheduler = Scheduler({"a": ["BUILDING"], "b": ["ACTIVE"], "c": ["BUILDING"]}, interrupt_at=3)
    with pytest.raises(Interrupted) as raised:
        waiting.wait_for(scheduler, ["a", "b", "c"], timeout=60, progress=quiet(), **timing())
    assert raised.value.exit_code == 130
    assert str(raised.value) == ("interrupted: 2 instance(s) still BUILDING; the scheduler carries on: "
                                 "`berth server list` shows them")
    assert isinstance(raised.value, CommandError)  # berth prints it as one line, no traceback
    scheduler = Scheduler({"a": ["BUILDING"], "b": ["SCHEDULED"]}, interrupt_at=2)
    with pytest.raises(Interrupted, match=r"^interrupted: 2 instance\(s\) still pending \(1 BUILDING, "
                       r"1 SCHEDULED\); the scheduler carries on"):
        waiting.wait_for(scheduler, ["a", "b"], timeout=60, progress=quiet(), **timing())


def test_ctrl_c_in_a_wait_for_anything_else_names_what_it_waited_for():
    def ask():
        raise KeyboardInterrupt

    with pytest.raises(Interrupted, match="^interrupted waiting for the agents to report$"):
        waiting.wait_until(ask, 5, "the agents to report", sleep=lambda _: None)


def test_ctrl_c_in_delete_wait_is_one_line_naming_what_is_left(tmp_path):
    uuids = [f"00000000-0000-4000-8000-00000000000{n}" for n in (1, 2)]

    class Deleting(Scheduler):
        def delete_instance(self, ctxt, uuid):
            self.deleted.append(uuid)

    scheduler = Deleting({u: ["ACTIVE", "DELETING"] for u in uuids}, interrupt_at=3)
    scheduler.deleted = []
    args = parse(write_conf(tmp_path), "delete", *uuids, "--wait")
    with pytest.raises(Interrupted) as raised:
        args.func(scheduler, args, io.StringIO())
    assert scheduler.deleted == uuids
    assert (raised.value.exit_code, str(raised.value)) == (
        130, "interrupted: 2 instance(s) still DELETING; the scheduler carries on: `berth server list` shows "
        "them")
