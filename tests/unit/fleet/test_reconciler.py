"""The reconciler over many hosts at once: each host's differences are its own."""

import datetime
import random
import uuid

from berth_contract.host_report import HostReport
from scheduler.fleet.reconciler import Reconciler

NOW = datetime.datetime(2026, 11, 30, 12, 0, 0)
OLD = NOW - datetime.timedelta(minutes=5)


class Rows:
    """The database as the reconciler reads it: the rows of the instances asked for."""

    def __init__(self, rows):
        self.rows = rows
        self.asked = []

    def instances_to_reconcile(self, hosts, uuids):
        self.asked.append((sorted(hosts), sorted(uuids)))
        hosts, uuids = set(hosts), set(uuids)
        return {u: dict(r) for u, r in self.rows.items()
                if u in uuids or (r["host"] in hosts and r["state"] in ("ACTIVE", "DELETING"))}

    def now(self):
        return NOW


#: A UUID per short name, so that the expected messages read as the test does.
U = {name: str(uuid.uuid5(uuid.NAMESPACE_OID, name))
     for name in ("a1", "a2", "b1", "b2", "c1", "m1", "e1", "o1", "new")}


def row(state, host, move_host=None):
    return {"state": state, "host": host, "move_host": move_host, "updated_at": OLD}


def report(host, held):
    return HostReport.from_wire({"host": host, "memory_mb": 1024, "free_ram_mb": 1024, "local_gb": 10,
                                 "free_disk_gb": 10, "vcpus": 4, "vcpus_used": 0, "running_vms": len(held),
                                 "instance_uuids": sorted(held)}, host)


def test_hosts_reconciled_together_each_get_their_own_differences():
    database = Rows({
        U["a1"]: row("ACTIVE", "h1"), U["a2"]: row("ACTIVE", "h1"),
        U["b1"]: row("ACTIVE", "h2"),  # h1 holds it too: a copy left behind
        U["b2"]: row("ACTIVE", "h2"),  # h2 no longer reports it
        U["c1"]: row("DELETED", "h3"),  # h3 still holds it
        U["m1"]: row("MIGRATING", "h1", move_host="h3"),  # held by both ends of its move
        U["e1"]: row("ERROR", None),  # held by h2
        U["o1"]: row("ACTIVE", "h9"),  # a host not reconciled now
    })
    terminated = []
    reconciler = Reconciler(database, 60, lambda ctx, host, uuid, why: terminated.append((host, uuid, why)),
                            rng=random.Random(0))
    found = reconciler.run({"h1": report("h1", {U["a1"], U["a2"], U["b1"], U["m1"]}),
                            "h2": report("h2", {U["b1"], U["e1"]}),
                            "h3": report("h3", {U["c1"], U["m1"], U["new"]})}, now=0.0)
    assert sorted((d.action, d.why) for d in found) == sorted([
        ("note", f"h3 holds {U['new']}, which the database does not know; left alone"),
        ("note", f"the database has {U['b2']} ACTIVE on h2, which no longer reports it"),
        ("terminate", f"h1 holds {U['b1']}, which is ACTIVE on h2 now"),
        ("terminate", f"h2 holds {U['e1']}, which is in ERROR on no host"),
        ("terminate", f"h3 holds {U['c1']}, which was deleted"),
    ])
    assert sorted(terminated) == [("h1", U["b1"], f"h1 holds {U['b1']}, which is ACTIVE on h2 now"),
                                  ("h2", U["e1"], f"h2 holds {U['e1']}, which is in ERROR on no host"),
                                  ("h3", U["c1"], f"h3 holds {U['c1']}, which was deleted")]
    # One read for the three hosts; none for a host looked at again before it is due.
    assert len(database.asked) == 1
    assert reconciler.run({"h1": report("h1", set())}, now=1.0) == []
    assert len(database.asked) == 1


def test_a_power_action_unheard_is_told_again_once_a_grace():
    database = Rows({U["a1"]: row("POWERING_OFF", "h1"), U["a2"]: row("SHUTOFF", "h1")})
    told = []
    reconciler = Reconciler(database, 60, lambda *args: None, rng=random.Random(0),
                            power=lambda ctx, host, uuid, action: told.append((host, uuid, action)))
    found = reconciler.run({"h1": report("h1", {U["a1"], U["a2"]})}, now=0.0)
    assert [(d.action, d.why) for d in found] == [
        ("power", f"h1 holds {U['a1']}, POWERING_OFF since 11:55:00")]
    assert told == [("h1", U["a1"], "power_off")]
    reconciler.run({"h1": report("h1", {U["a1"], U["a2"]})}, now=200.0)  # due again, past the grace
    assert told == [("h1", U["a1"], "power_off")] * 2
