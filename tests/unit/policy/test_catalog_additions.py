"""The rest of Nova's catalog: AggregateIoOpsFilter, AggregateNumInstancesFilter,
AggregateTypeAffinityFilter, AggregateImagePropertiesIsolation and AllHostsFilter.

Cases follow Nova 34's code (nova/scheduler/filters/io_ops_filter.py,
num_instances_filter.py, type_filter.py, aggregate_image_properties_isolation.py,
all_hosts_filter.py and utils.py), edges included; every case checks that the
per-host and the vector forms agree.
"""

import dataclasses
import random

import numpy as np
import pytest

from berth_contract.request_spec import RequestSpec
from scheduler.admin import grouping as admin
from scheduler.exception import InvalidRequest, NoValidHost
from scheduler.policy import filters
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector
from scheduler.simulation.host_tables import random_fleet, rich_spec
from tests.unit.policy.fakes import make_host, make_spec
from tests.unit.policy.test_catalog import plugin

NEW_FILTERS = ["AggregateImagePropertiesIsolation", "AggregateIoOpsFilter", "AggregateNumInstancesFilter",
               "AggregateTypeAffinityFilter", "AllHostsFilter"]


def passing(f, table, spec):
    """The hosts ``f`` passes, per host; asserts the vector form agrees over every row,
    a subset of the rows and the whole-table slice."""
    per_host = [view.host for view in table.views() if f.host_passes(view, spec)]
    rows = np.arange(len(table))
    for subset in (rows, rows[::2], rows[1::2][::-1], slice(None)):
        chosen = table.row_numbers(subset)
        mask = np.broadcast_to(np.asarray(f.filter_vector(table, subset, spec), dtype=bool),
                               (len(chosen),))
        kept = [table.names[int(r)] for r, ok in zip(chosen, mask, strict=True) if ok]
        assert kept == [table.names[int(r)] for r in chosen if table.names[int(r)] in per_host]
    return per_host


def fleet(*names):
    table = HostTable()
    for name in names:
        make_host(name, table=table)
    return table


def flavor_spec(name=None, count=1, **image_properties):
    flavor = {"memory_mb": 512, "root_gb": 1, "vcpus": 1}
    if name is not None:
        flavor["name"] = name
    return RequestSpec.from_wire(
        {"num_instances": count, "instance_type": flavor, "image": {"properties": image_properties}}, {}
    )


def test_the_new_filters_are_installed_with_a_vector_form():
    installed = filters.all_filters()
    for name in NEW_FILTERS:
        assert installed[name].filter_vector is not None


# -- AggregateIoOpsFilter, AggregateNumInstancesFilter --------------------------------

LOAD_FILTERS = [("AggregateIoOpsFilter", "max_io_ops_per_host", "num_io_ops", 8),
                ("AggregateNumInstancesFilter", "max_instances_per_host", "num_instances", 50)]


def _loaded_fleet(column, counts):
    """Hosts h0.. with ``column`` set to each of ``counts``."""
    table = fleet(*(f"h{i}" for i in range(len(counts))))
    for view, count in zip(table.views(), counts, strict=True):
        setattr(view, column, count)
    return table


@pytest.mark.parametrize("name, key, column, default", LOAD_FILTERS)
def test_aggregate_load_filters_fall_back_to_the_option(policy_conf, name, key, column, default):
    table = _loaded_fleet(column, [default - 1, default, default + 1])
    f = plugin(policy_conf, "filter", name)
    assert passing(f, table, make_spec()) == ["h0"]  # below the maximum, as IoOpsFilter / NumInstancesFilter
    # An aggregate without the key, or with it but not holding the host, changes nothing.
    table.set_aggregates([{"name": "a", "hosts": ["h0", "h1"], "metadata": {"ssd": "true"}},
                          {"name": "b", "hosts": [], "metadata": {key: "1"}}])
    assert passing(f, table, make_spec()) == ["h0"]
    policy_conf.set_override(key, default + 2, "filter_scheduler")
    f = plugin(policy_conf, "filter", name)
    assert passing(f, table, make_spec()) == ["h0", "h1", "h2"]


@pytest.mark.parametrize("name, key, column, default", LOAD_FILTERS)
@pytest.mark.parametrize("values, maximum", [
    (["3"], 3),
    (["20"], 20),  # above the option: the aggregate still decides
    (["5", "3"], 3),  # the smallest of the host's aggregates
    (["3", "3"], 3),
    ([" 4 "], 4),  # Python's int() takes the spaces
    (["+4"], 4),
    (["abc"], None),  # not an int: the option
    (["3", "abc"], None),  # one value not an int: the option, not the smallest valid one
    (["2.5"], None),  # int("2.5") raises, as in Nova: the option
    (["3.0"], None),
    ([""], None),
    (["0"], 0),  # as Nova: nothing passes
    (["-1"], -1),
])
def test_aggregate_load_filters_take_the_smallest_aggregate_value_as_nova(
        policy_conf, name, key, column, default, values, maximum):
    counts = list(range(0, 25))
    table = _loaded_fleet(column, counts)
    others = [f"h{i}" for i in range(0, 25, 2)]  # the odd hosts are in every aggregate
    members = [f"h{i}" for i in range(1, 25, 2)]
    table.set_aggregates([{"name": f"a{i}", "hosts": members, "metadata": {key: value}}
                          for i, value in enumerate(values)])
    f = plugin(policy_conf, "filter", name)
    expected_max = default if maximum is None else maximum
    expected = [f"h{i}" for i in counts
                if i < (expected_max if f"h{i}" in members else default)]
    assert passing(f, table, make_spec()) == expected
    assert [h for h in others if h in expected] == [h for h in others if int(h[1:]) < default]


@pytest.mark.parametrize("name, key, column, default", LOAD_FILTERS)
def test_aggregate_load_filters_follow_aggregate_changes(policy_conf, name, key, column, default):
    table = _loaded_fleet(column, [2, 2])
    f = plugin(policy_conf, "filter", name)
    table.set_aggregates([{"name": "a", "hosts": ["h0"], "metadata": {key: "2"}}])
    assert passing(f, table, make_spec()) == ["h1"]
    table.set_aggregates([{"name": "a", "hosts": ["h0", "h1"], "metadata": {key: "3"}}])
    assert passing(f, table, make_spec()) == ["h0", "h1"]
    make_host("h2", table=table)  # a new row: the cached per-row maximum is rebuilt
    table.set_aggregates([{"name": "a", "hosts": ["h2"], "metadata": {key: "0"}}])
    assert passing(f, table, make_spec()) == ["h0", "h1"]


def test_aggregate_io_ops_filter_counts_this_requests_own_placements(policy_conf):
    """Every instance of a request is filtered again: its placements count as io ops."""
    table = fleet("h0", "h1")
    table.set_aggregates([{"name": "a", "hosts": ["h0", "h1"], "metadata": {"max_io_ops_per_host": "1"}}])
    f = plugin(policy_conf, "filter", "AggregateIoOpsFilter")
    assert not f.run_filter_once_per_request
    for vectorized in (True, False):
        chosen = Selector([f], [], vectorized=vectorized).select(table, make_spec(count=2))
        assert sorted(h.host for h in chosen) == ["h0", "h1"]
        with pytest.raises(NoValidHost) as exc:
            Selector([f], [], vectorized=vectorized).select(table, make_spec())
        assert "AggregateIoOpsFilter removed 2" in str(exc.value)
        for view in chosen:
            for uuid in list(view.pending):
                view.release(uuid)


def test_aggregate_num_instances_filter_counts_this_requests_own_placements(policy_conf):
    table = fleet("h0", "h1")
    table.set_aggregates([{"name": "a", "hosts": ["h0"], "metadata": {"max_instances_per_host": "2"}}])
    f = plugin(policy_conf, "filter", "AggregateNumInstancesFilter")
    # Tied weights go to the earlier row: h0 takes two instances, then is full.
    chosen = Selector([f], []).select(table, make_spec(count=3))
    assert [h.host for h in chosen] == ["h0", "h0", "h1"]


@pytest.mark.parametrize("key", ["max_io_ops_per_host", "max_instances_per_host"])
def test_set_metadata_refuses_what_the_aggregate_load_filters_cannot_read(key):
    assert admin.check_metadata({key: "4"}) == {key: "4"}
    assert admin.check_metadata({key: None}) == {key: None}  # unsetting stays possible
    for bad in ("0", "-3", "abc", "inf"):
        with pytest.raises(InvalidRequest, match=key):
            admin.check_metadata({key: bad})
    numeric = admin.numeric_metadata()
    assert numeric[key][0] == 0
    assert "Aggregate" in " ".join(numeric[key][1])


# -- AggregateTypeAffinityFilter -------------------------------------------------------

def _typed_fleet():
    table = fleet("free", "small", "small_or_tiny", "two_aggregates", "untyped_aggregate", "empty")
    table.set_aggregates([
        {"name": "s", "hosts": ["small", "two_aggregates"], "metadata": {"instance_type": "m1.small"}},
        {"name": "st", "hosts": ["small_or_tiny"], "metadata": {"instance_type": " m1.tiny ,m1.small "}},
        {"name": "l", "hosts": ["two_aggregates"], "metadata": {"instance_type": "m1.large"}},
        {"name": "u", "hosts": ["untyped_aggregate"], "metadata": {"ssd": "true"}},
        {"name": "e", "hosts": ["empty"], "metadata": {"instance_type": ""}},
    ])
    return table


@pytest.mark.parametrize("flavor, expected", [
    ("m1.small", ["free", "small", "small_or_tiny", "two_aggregates", "untyped_aggregate"]),
    ("m1.tiny", ["free", "small_or_tiny", "untyped_aggregate"]),  # a comma-separated piece, stripped
    ("m1.large", ["free", "two_aggregates", "untyped_aggregate"]),  # any of the host's aggregates
    ("m1.medium", ["free", "untyped_aggregate"]),
    ("m1", ["free", "untyped_aggregate"]),  # a whole name, not a substring
    ("m1.small ", ["free", "untyped_aggregate"]),  # the flavor's name is not stripped
    (None, ["free", "untyped_aggregate"]),  # a flavor without a name matches no listed name
])
def test_aggregate_type_affinity_filter(policy_conf, flavor, expected):
    f = plugin(policy_conf, "filter", "AggregateTypeAffinityFilter")
    assert f.run_filter_once_per_request
    assert passing(f, _typed_fleet(), flavor_spec(flavor)) == expected


def test_aggregate_type_affinity_filter_without_typed_aggregates_passes_everything(policy_conf):
    f = plugin(policy_conf, "filter", "AggregateTypeAffinityFilter")
    table = fleet("h0", "h1")
    assert passing(f, table, flavor_spec("m1.small")) == ["h0", "h1"]
    table.set_aggregates([{"name": "a", "hosts": ["h0"], "metadata": {"instance_types": "m1.tiny"}}])
    assert passing(f, table, flavor_spec("m1.small")) == ["h0", "h1"]
    assert f.filter_vector(table, np.arange(2), flavor_spec("m1.small")) is True


# -- AggregateImagePropertiesIsolation -------------------------------------------------

def _isolated_fleet():
    table = fleet("free", "ubuntu", "ubuntu_or_debian", "two_aggregates", "ssd", "empty", "flags")
    table.set_aggregates([
        {"name": "u", "hosts": ["ubuntu", "two_aggregates"], "metadata": {"os_distro": "ubuntu"}},
        {"name": "ud", "hosts": ["ubuntu_or_debian"], "metadata": {"os_distro": "ubuntu, debian ,"}},
        {"name": "c", "hosts": ["two_aggregates"], "metadata": {"os_distro": "centos", "ssd": "true"}},
        {"name": "s", "hosts": ["ssd"], "metadata": {"ssd": "true"}},
        {"name": "e", "hosts": ["empty"], "metadata": {"os_distro": ""}},
        {"name": "f", "hosts": ["flags"], "metadata": {"hw_qemu_guest_agent": "True", "hw_disk_count": "2",
                                                      "img_ratio": "1.0"}},
    ])
    return table


ALL_ISOLATED = ["free", "ubuntu", "ubuntu_or_debian", "two_aggregates", "ssd", "empty", "flags"]


@pytest.mark.parametrize("properties, expected", [
    ({}, ALL_ISOLATED),
    ({"os_distro": "ubuntu"}, ["free", "ubuntu", "ubuntu_or_debian", "two_aggregates", "ssd", "flags"]),
    ({"os_distro": "debian"}, ["free", "ubuntu_or_debian", "ssd", "flags"]),
    ({"os_distro": "centos"}, ["free", "two_aggregates", "ssd", "flags"]),  # values of all its aggregates
    ({"os_distro": "windows"}, ["free", "ssd", "flags"]),
    ({"os_distro": "Ubuntu"}, ["free", "ssd", "flags"]),  # compared as given
    ({"os_distro": " ubuntu"}, ["free", "ssd", "flags"]),  # the metadata is stripped, the property not
    ({"os_distro": ""}, ALL_ISOLATED),  # an empty property is not checked
    ({"ssd": "true"}, ALL_ISOLATED),
    ({"ssd": "false"}, ["free", "ubuntu", "ubuntu_or_debian", "empty", "flags"]),
    ({"ssd": "false", "os_distro": "ubuntu"}, ["free", "ubuntu", "ubuntu_or_debian", "flags"]),
    # Any key of the metadata, availability_zone included, as Nova's with no namespace.
    ({"availability_zone": "az9"}, ALL_ISOLATED),
    # Values are compared as str(value): True is "True", 2 is "2", 1.0 is "1.0".
    ({"hw_qemu_guest_agent": True}, ALL_ISOLATED),
    ({"hw_qemu_guest_agent": "true"}, ["free", "ubuntu", "ubuntu_or_debian", "two_aggregates", "ssd",
                                       "empty"]),
    ({"hw_qemu_guest_agent": False}, ALL_ISOLATED),  # a false property is not checked
    ({"hw_disk_count": 2}, ALL_ISOLATED),
    ({"hw_disk_count": 0}, ALL_ISOLATED),
    ({"hw_disk_count": 3}, ["free", "ubuntu", "ubuntu_or_debian", "two_aggregates", "ssd", "empty"]),
    ({"img_ratio": 1.0}, ALL_ISOLATED),
    ({"img_ratio": 1}, ["free", "ubuntu", "ubuntu_or_debian", "two_aggregates", "ssd", "empty"]),
])
def test_aggregate_image_properties_isolation(policy_conf, properties, expected):
    f = plugin(policy_conf, "filter", "AggregateImagePropertiesIsolation")
    assert f.run_filter_once_per_request
    assert passing(f, _isolated_fleet(), flavor_spec("m1.small", **properties)) == expected


def test_aggregate_image_properties_isolation_an_empty_value_offers_the_empty_piece(policy_conf):
    f = plugin(policy_conf, "filter", "AggregateImagePropertiesIsolation")
    table = fleet("h0")
    table.set_aggregates([{"name": "a", "hosts": ["h0"], "metadata": {"os_distro": "ubuntu,"}}])
    assert passing(f, table, flavor_spec(os_distro="ubuntu")) == ["h0"]
    assert passing(f, table, flavor_spec(os_distro="debian")) == []


@pytest.mark.parametrize("namespace, separator, properties, expected", [
    # Only keys starting with namespace + separator are checked.
    ("iso", ".", {"iso.tier": "gold"}, ["free", "gold", "plain"]),
    ("iso", ".", {"iso.tier": "silver"}, ["free", "plain"]),
    ("iso", ".", {"os_distro": "windows"}, ["free", "gold", "plain"]),  # outside the namespace
    ("iso", ".", {"iso_tier": "silver"}, ["free", "gold", "plain"]),
    ("iso", "_", {"iso_tier": "silver"}, ["free", "plain"]),
    ("iso", "_", {"iso.tier": "silver"}, ["free", "gold", "plain"]),
    ("iso", "", {"isotope": "x"}, ["free", "plain"]),  # no separator: a plain prefix, isotope is in it
    ("iso", ".", {"isotope": "x"}, ["free", "gold", "plain"]),
    ("iso", "", {"iso.tier": "silver"}, ["free", "plain"]),
    ("", ".", {"os_distro": "windows"}, ["free", "gold"]),  # an empty namespace checks every key
    (None, ".", {"os_distro": "windows"}, ["free", "gold"]),
])
def test_aggregate_image_properties_isolation_namespace(policy_conf, namespace, separator, properties,
                                                        expected):
    policy_conf.set_override("aggregate_image_properties_isolation_namespace", namespace, "filter_scheduler")
    policy_conf.set_override("aggregate_image_properties_isolation_separator", separator, "filter_scheduler")
    f = plugin(policy_conf, "filter", "AggregateImagePropertiesIsolation")
    table = fleet("free", "gold", "plain")
    table.set_aggregates([
        {"name": "g", "hosts": ["gold"], "metadata": {"iso.tier": "gold", "iso_tier": "gold",
                                                      "isotope": "y"}},
        {"name": "p", "hosts": ["plain"], "metadata": {"os_distro": "ubuntu"}},
    ])
    assert passing(f, table, flavor_spec(**properties)) == expected


def test_aggregate_image_properties_isolation_options_are_in_the_sample_config():
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[3] / "etc/berth/berth.conf.sample").read_text()
    assert "#aggregate_image_properties_isolation_namespace = <None>" in text
    assert "#aggregate_image_properties_isolation_separator = ." in text


# -- AllHostsFilter -----------------------------------------------------------------------

def test_all_hosts_filter_passes_every_host(policy_conf):
    f = plugin(policy_conf, "filter", "AllHostsFilter")
    assert f.run_filter_once_per_request
    table = fleet("h0", "h1", "h2")
    table.disabled[1] = True  # not even ComputeFilter's business
    assert passing(f, table, flavor_spec("m1.small", os_distro="x")) == ["h0", "h1", "h2"]
    assert f.limits(table.view(0)) == {}


# -- the vector forms against the per-host ones, on random fleets -------------------------

def _random_catalog_aggregates(rng, table):
    """The rich fleet's aggregates, with the metadata the new filters read added at random."""
    found = []
    for aggregate in table.aggregates:
        value = aggregate.to_dict()
        metadata = value["metadata"]
        for key in ("max_io_ops_per_host", "max_instances_per_host"):
            if rng.random() < 0.5:
                metadata[key] = rng.choice(["0", "3", "6", "10", "40", "60", "2.5", "bad", " 7"])
        if rng.random() < 0.5:
            metadata["instance_type"] = rng.choice(["m1.small", "m1.tiny, m1.large", "m1.xlarge,m1.medium",
                                                    ""])
        for key, choices in (("os_distro", ["ubuntu", "ubuntu,debian", "centos"]),
                             ("iso.tier", ["gold", "gold, silver"]),
                             ("hw_qemu_guest_agent", ["True", "False"])):
            if rng.random() < 0.4:
                metadata[key] = rng.choice(choices)
        found.append(value)
    return found


def _random_request(rng, seed, table):
    spec = rich_spec(seed, table, count=1 + seed % 2)
    props = dict(spec.image_properties)
    for key, choices in (("os_distro", ["ubuntu", "debian", "centos", "", "windows"]),
                         ("iso.tier", ["gold", "silver", "bronze"]),
                         ("hw_qemu_guest_agent", [True, False, "True"]),
                         ("ssd", ["true", "false"])):
        if rng.random() < 0.5:
            props[key] = rng.choice(choices)
    spec.image_properties = props
    if rng.random() < 0.2:
        spec.flavor = dataclasses.replace(spec.flavor, name=None)
    return spec


@pytest.mark.parametrize("name", NEW_FILTERS)
@pytest.mark.parametrize("seed", range(6))
def test_vector_forms_agree_on_random_fleets(policy_conf, name, seed):
    rng = random.Random(seed)
    if seed % 3 == 1:
        policy_conf.set_override("aggregate_image_properties_isolation_namespace", "iso", "filter_scheduler")
    if seed % 3 == 2:
        policy_conf.set_override("max_io_ops_per_host", 4, "filter_scheduler")
        policy_conf.set_override("max_instances_per_host", 20, "filter_scheduler")
    table = random_fleet(200, seed=seed, rich=True)
    table.set_aggregates(_random_catalog_aggregates(rng, table))
    f = plugin(policy_conf, "filter", name)
    decided = set()
    for i in range(8):
        spec = _random_request(rng, seed * 100 + i, table)
        decided.add(len(passing(f, table, spec)))
    if name != "AllHostsFilter":
        assert len(decided) > 1 or 0 < min(decided) < len(table)  # the fleets exercise the filter


@pytest.mark.parametrize("seed", range(4))
def test_pipelines_with_the_new_filters_pick_the_same_hosts(policy_conf, seed):
    rng = random.Random(seed)
    tables = [random_fleet(300, seed=seed, rich=True) for _ in range(2)]
    aggregates = _random_catalog_aggregates(rng, tables[0])
    for table in tables:
        table.set_aggregates(aggregates)
    policy_conf.set_override("enabled_filters", ["RamFilter"] + NEW_FILTERS, "filter_scheduler")
    ram = plugin(policy_conf, "weigher", "RAMWeigher")
    selectors = [Selector(filters.enabled_filters(policy_conf), [ram], 2, random.Random(seed),
                          vectorized=vectorized) for vectorized in (True, False)]
    placed = 0
    for i in range(15):
        spec = _random_request(rng, seed * 100 + i, tables[0])
        picked = []
        for selector, table in zip(selectors, tables, strict=True):
            try:
                picked.append([h.host for h in selector.select(table, spec)])
            except NoValidHost as exc:
                picked.append(str(exc))
        assert picked[0] == picked[1]
        placed += isinstance(picked[0], list)
    assert placed
    assert np.array_equal(tables[0].num_io_ops, tables[1].num_io_ops)
