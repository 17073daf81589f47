"""``berth server stop``, ``start``, ``reboot`` and ``console log show``: arguments, what each sends,
what it prints and its refusals (the whole way, on real processes: tests/functional/test_power.py)."""

import io

import pytest

from scheduler import rpc
from scheduler.cmd.arguments import CommandError
from tests.unit.cli_scheduler import parse, write_conf

U1 = "00000000-0000-4000-8000-000000000001"


class Scheduler:
    """A fake scheduler with one instance named web, ACTIVE on h1 unless said."""

    def __init__(self, state="ACTIVE", host="h1", refuse=None):
        self.instance = {"uuid": U1, "display_name": "web", "state": state, "host": host, "memory_mb": 512,
                         "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1}
        self.refuse = refuse
        self.calls = []
        self.transport = None

    def list_instances(self, ctxt, name=None, uuids=None, **kwargs):
        return [self.instance] if name in (None, "web") or uuids else []

    def show_instance(self, ctxt, uuid):
        return dict(self.instance)

    def _power(self, method, uuid, **kwargs):
        self.calls.append((method, uuid, kwargs))
        if self.refuse:
            raise rpc.RemoteError("PowerRefused", self.refuse, "Traceback ...")
        return dict(self.instance, state={"stop_instance": "POWERING_OFF", "start_instance": "POWERING_ON",
                                          "reboot_instance": "REBOOTING"}[method])

    def stop_instance(self, ctxt, uuid):
        return self._power("stop_instance", uuid)

    def start_instance(self, ctxt, uuid):
        return self._power("start_instance", uuid)

    def reboot_instance(self, ctxt, uuid, hard=False):
        return self._power("reboot_instance", uuid, hard=hard)


@pytest.fixture
def conf_file(tmp_path):
    return write_conf(tmp_path)


def run(conf_file, scheduler, *argv):
    args = parse(conf_file, *argv)
    out = io.StringIO()
    return args.func(scheduler, args, out), out.getvalue()


@pytest.mark.parametrize(("argv", "sent", "said"), [
    (("stop", "web"), ("stop_instance", U1, {}), f"{U1} POWERING_OFF\n"),
    (("start", U1), ("start_instance", U1, {}), f"{U1} POWERING_ON\n"),
    (("reboot", "web"), ("reboot_instance", U1, {"hard": False}), f"{U1} REBOOTING\n"),
    (("reboot", "--hard", "web"), ("reboot_instance", U1, {"hard": True}), f"{U1} REBOOTING\n"),
])
def test_each_action_names_the_instance_by_name_or_uuid_and_says_its_state_now(conf_file, argv, sent, said):
    scheduler = Scheduler()
    assert run(conf_file, scheduler, *argv) == (0, said)
    assert scheduler.calls == [sent]


def test_a_refusal_is_the_schedulers_reason(conf_file):
    reason = (f"Instance {U1} cannot be stopped: it is SHUTOFF (stopped already); only an ACTIVE instance "
              "can be")
    with pytest.raises(rpc.RemoteError) as refused:
        run(conf_file, Scheduler(refuse=reason), "stop", "web")
    assert refused.value.value == reason  # berth prints it: "berth: Instance ... can be"


def test_an_unknown_name_is_refused_before_anything_is_sent(conf_file):
    scheduler = Scheduler()
    with pytest.raises(CommandError, match="No instance named db"):
        run(conf_file, scheduler, "start", "db")
    assert scheduler.calls == []


def test_the_console_of_an_instance_on_no_host_is_refused(conf_file):
    with pytest.raises(CommandError, match=f"instance {U1} is ERROR on no host: it has no console"):
        run(conf_file, Scheduler(state="ERROR", host=None), "console-log", "web")


@pytest.mark.parametrize("lines", ["0", "-3", "many"])
def test_console_log_lines_must_be_a_positive_number(conf_file, lines, capsys):
    with pytest.raises(SystemExit):
        parse(conf_file, "console-log", "web", "--lines", lines)


def test_wait_prints_its_listing_in_the_format_asked_and_a_format_without_wait_is_refused(conf_file,
                                                                                          monkeypatch):
    from scheduler.cmd import power_commands

    monkeypatch.setattr(power_commands, "wait_for", lambda client, uuids, timeout, settled: {
        u: dict(client.instance, state=settled[0]) for u in uuids})
    stopped = run(conf_file, Scheduler(), "stop", "web", "--wait", "-f", "value", "-c", "state")
    assert stopped == (0, "SHUTOFF\n")
    scheduler = Scheduler()
    with pytest.raises(CommandError, match=r"^-f and -c go with --wait \(the listing it prints\)"):
        run(conf_file, scheduler, "start", "web", "-f", "json")
    assert scheduler.calls == []
