"""``berth server create --min-count M --count N``: as many of N instances as fit, at least M, as Nova's
min_count and max_count; fewer than M fit: none booted, and why. The scheduler, an agent and
the command line in this process, on memory:// and SQLite (test_request_ids' stack)."""

import json

from tests.unit.scheduler.test_request_ids import GUARD, berth, stack  # noqa: F401

#: 3 of these fit on an agent of the fake driver (32768 MB, 512 reserved).
LARGE = ("--flavor-ram", "8192", "--flavor-vcpus", "1")


def boot(conf, tmp_path, *argv):
    return berth(conf, tmp_path, "boot", *LARGE, "--wait", "--timeout", str(GUARD), *argv)


def refused_boot(conf, tmp_path, capsys, *argv):
    """(status, stdout, the command line's lines on stderr) of a boot on one agent."""
    capsys.readouterr()
    status, out = boot(conf, tmp_path, *argv)
    return status, out, [line for line in capsys.readouterr().err.splitlines() if line.startswith("berth")]


def listed(conf, tmp_path, *argv):
    status, out = berth(conf, tmp_path, "instances", "-f", "json", *argv)
    assert status == 0, out
    return json.loads(out)


def test_as_many_as_fit_are_booted_and_the_others_not_with_the_reason_said_once(conf, tmp_path, stack):  # noqa: F811
    service, add_agent, _ = stack
    add_agent("agent-1")
    status, out = boot(conf, tmp_path, "--min-count", "2", "--count", "5", "--name", "web-%d")
    assert status == 0, out
    *table, summary = out.splitlines()
    assert [line.split()[1:3] for line in table[1:]] == [["ACTIVE", "agent-1"]] * 3, out
    assert summary.startswith(
        "3 of 5 booted; the other 2 not: Not placed: 3 of 5 fit, and the request asked for as many as fit "
        "(at least 2); No valid host was found for instance 4 of 5: of the 1 host that passed the filters "
        "for instance 3, RamFilter removed 1; none left"), summary
    assert sorted(i["NAME"] for i in listed(conf, tmp_path)) == ["web-1", "web-2", "web-3"]
    left_out = [i for i in listed(conf, tmp_path, "--all") if i["STATE"] != "ACTIVE"]
    assert sorted((i["NAME"], i["STATE"], i["HOST"]) for i in left_out) == [
        ("web-4", "DELETED", None), ("web-5", "DELETED", None)]
    assert all(i["FAULT"].startswith("Not placed: 3 of 5 fit") for i in left_out)
    [host] = service.manager.list_hosts({})
    assert (host["running_vms"], host["pending"], host["free_ram_mb"]) == (3, 0, 32256 - 3 * 8192)


def test_fewer_than_the_minimum_fit_none_is_booted_and_none_left_in_error(conf, tmp_path, stack, capsys):  # noqa: F811
    stack[1]("agent-1")
    status, out, said = refused_boot(conf, tmp_path, capsys, "--min-count", "4", "--count", "5")
    assert (status, out) == (1, ""), said
    assert said == [
        "berth: none of the 5 instances booted: No valid host was found for instance 4 of 5: of the 1 host "
        "that passed the filters for instance 3, RamFilter removed 1; none left (none booted: 3 of 5 fit, "
        "fewer than the 4 asked for at least)"]
    assert listed(conf, tmp_path) == []
    assert {i["STATE"] for i in listed(conf, tmp_path, "--all")} == {"DELETED"}
    # Nothing held: the 3 that fit are booted by the next request.
    status, out = boot(conf, tmp_path, "--min-count", "3", "--count", "3")
    assert status == 0 and out.count(" ACTIVE ") == 3, out
    status, out, said = refused_boot(conf, tmp_path, capsys, "--min-count", "1", "--count", "2")
    assert said == ["berth: none of the 2 instances booted: No valid host was found for instance 1 of 2: "
                    "1 host considered; RamFilter removed 1; none left (none fit; at least 1 asked)"]


def test_a_minimum_above_the_count_is_refused_before_anything_is_asked(conf, tmp_path, stack, capsys):  # noqa: F811
    stack[1]("agent-1")
    status, out, said = refused_boot(conf, tmp_path, capsys, "--min-count", "6", "--count", "5")
    assert (status, out, said) == (1, "", ["berth: --min-count 6 is more than --count 5; nothing booted"])
    assert listed(conf, tmp_path, "--all") == []


def test_only_the_instances_booted_join_the_server_group(conf, tmp_path, stack):  # noqa: F811
    service, add_agent, _ = stack
    add_agent("agent-1")
    add_agent("agent-2")
    status, out = berth(conf, tmp_path, "server-group", "create", "apart", "--policy", "anti-affinity")
    assert status == 0, out
    status, out = boot(conf, tmp_path, "--min", "1", "--max", "4", "--hint", "group=apart")
    assert status == 0, out
    assert out.splitlines()[-1].startswith(
        "2 of 4 booted; the other 2 not: Not placed: 2 of 4 fit, and the request asked for as many as fit "
        "(at least 1); No valid host was found for instance 3 of 4: "), out
    booted = {i["UUID"] for i in listed(conf, tmp_path)}
    [group] = json.loads(berth(conf, tmp_path, "server-group", "list", "-f", "json")[1])
    assert len(booted) == 2 and set(service.database.get_server_group(group["UUID"])["members"]) == booted
