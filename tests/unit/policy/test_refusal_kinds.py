"""What a refusal says of many hosts is read once per kind of host, not once per host: the
kinds the refusal reasons group the hosts into hold each host once, and only alike hosts."""

import numpy as np

from scheduler.policy import aggregates
from scheduler.policy.filters import image_props
from scheduler.simulation.host_tables import random_fleet


def test_hosts_alike_in_their_aggregates_are_counted_together_and_each_once():
    table = random_fleet(3000, seed=4, rich=True)
    rows = np.flatnonzero(np.arange(len(table)) % 3 != 0)
    groups = aggregates.memberships(table, rows)
    assert sum(count for _, count in groups) == len(rows)
    by_set = {}
    for row in rows.tolist():
        key = frozenset(a.name for a in table.aggregate_index.of_row(row))
        by_set[key] = by_set.get(key, 0) + 1
    assert {frozenset(a.name for a in found): count for found, count in groups} == by_set
    assert len(groups) > 1


def test_hosts_alike_in_what_the_image_filter_reads_are_counted_together_and_each_once():
    table = random_fleet(3000, seed=5, rich=True)
    rows = np.flatnonzero(np.arange(len(table)) % 2 == 0)

    def read(host):
        return (repr(host.supported_instances), host.hypervisor_version, host.cpu_info)

    kinds = image_props._kinds(table, rows)
    assert sum(count for _, count in kinds) == len(rows)
    by_kind = {}
    for row in rows.tolist():
        key = read(table.view(row))
        by_kind[key] = by_kind.get(key, 0) + 1
    assert {read(host): count for host, count in kinds} == by_kind
    assert len(kinds) > 1


def test_no_host_has_no_kind():
    table = random_fleet(10, seed=1, rich=True)
    empty = np.array([], dtype=np.intp)
    assert aggregates.memberships(table, empty) == []
