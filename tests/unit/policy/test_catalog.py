"""Nova's filter and weigher catalog: the rules, and their edges."""

import pytest

from scheduler.exception import NoValidHost
from scheduler.policy import filters, weighers
from scheduler.policy.filters import extra_specs_ops
from scheduler.policy.host_state import HostTable
from scheduler.policy.selection import Selector
from tests.unit.policy.fakes import make_host, make_spec


def plugin(conf, kind, name):
    if kind == "filter":
        return filters.all_filters()[name](conf)
    return weighers.all_weighers()[name](conf)


@pytest.mark.parametrize("value, req, expected", [
    ("4", "= 4", True), ("5", "= 4", True), ("3", "= 4", False),
    ("4", "== 4.0", True), ("4", "!= 4", False), ("5", ">= 4", True), ("5", "<= 4", False),
    ("abc", "s== abc", True), ("abc", "s!= abc", False), ("abc", "s< abd", True),
    ("abc", "s<= abc", True), ("abd", "s> abc", True), ("abc", "s>= abd", False),
    ("sse avx", "<in> avx", True), ("sse", "<in> avx", False),
    ("sse avx", "<all-in> sse avx", True), ("sse", "<all-in> sse avx", False),
    ("b", "<or> a <or> b", True), ("c", "<or> a <or> b", False),
    ("x", "x", True), ("x", "y", False), (None, "= 1", False), ("abc", "= 1", False),
])
def test_extra_specs_operators(value, req, expected):
    assert extra_specs_ops.match(value, req) is expected


@pytest.mark.parametrize(("name", "extra_specs", "why"), [
    ("ComputeCapabilitiesFilter", {"capabilities:free_ram_mb": ">= lots"},
     "flavor extra spec capabilities:free_ram_mb: '>= lots': >= compares numbers and 'lots' is not one; "
     "use s== to compare text"),
    ("ComputeCapabilitiesFilter", {"capabilities:hypervisor_type": "<or>"},
     "flavor extra spec capabilities:hypervisor_type: '<or>': <or> needs at least one alternative"),
    ("ComputeCapabilitiesFilter", {"vcpus_total": "= x"}, "flavor extra spec vcpus_total: '= x'"),
    ("AggregateInstanceExtraSpecsFilter", {"aggregate_instance_extra_specs:gpu": "== two"},
     "flavor extra spec gpu: '== two': == compares numbers"),
    ("AggregateInstanceExtraSpecsFilter", {"ssd": "<or>"}, "flavor extra spec ssd: '<or>'"),
])
def test_a_requirement_that_can_match_nothing_refuses_the_request(policy_conf, name, extra_specs, why):
    from scheduler.policy import hints
    from tests.unit.policy.test_catalog_additions import flavor_spec

    spec = flavor_spec()
    spec.flavor.extra_specs.update(extra_specs)
    assert hints.unhonoured(spec, [plugin(policy_conf, "filter", name)], {}, {}).startswith(f"{name}: {why}")


@pytest.mark.parametrize("extra_specs", [
    {"ssd": ">= lots"},  # unscoped and no attribute: ComputeCapabilitiesFilter ignores it, as Nova does
    {"capabilities:free_ram_mb": ">= 1024", "capabilities:cpu_info:arch": "s== x86_64", "x": "<or> a"},
])
def test_well_formed_or_ignored_requirements_are_not_refused(policy_conf, extra_specs):
    from scheduler.policy import hints
    from tests.unit.policy.test_catalog_additions import flavor_spec

    spec = flavor_spec()
    spec.flavor.extra_specs.update(extra_specs)
    capabilities = plugin(policy_conf, "filter", "ComputeCapabilitiesFilter")
    assert hints.unhonoured(spec, [capabilities], {}, {}) is None


def test_aggregate_ram_filter_uses_the_smallest_aggregate_ratio_and_reports_it(policy_conf):
    table = HostTable()
    host = make_host("h1", ram=1000, free_ram=0, table=table)
    other = make_host("h2", ram=1000, free_ram=0, table=table)
    table.set_aggregates([
        {"name": "a", "hosts": ["h1"], "metadata": {"ram_allocation_ratio": "3.0"}},
        {"name": "b", "hosts": ["h1"], "metadata": {"ram_allocation_ratio": "2.0"}},
    ])
    policy_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    f = plugin(policy_conf, "filter", "AggregateRamFilter")
    spec = make_spec(memory_mb=900)
    assert f.host_passes(host, spec) and f.limits(host) == {"memory_mb": 2000.0}
    # h2 falls back to [filter_scheduler] ram_allocation_ratio (1.5): 500 MB left
    assert not f.host_passes(other, spec) and f.limits(other) == {"memory_mb": 1500.0}
    table.set_aggregates([{"name": "a", "hosts": ["h1"], "metadata": {"ram_allocation_ratio": "x"}}])
    assert f.limits(host) == {"memory_mb": 1500.0}  # not a number: the option


def test_anti_affinity_counts_members_placed_and_pending(policy_conf):
    table = HostTable()
    hosts = [make_host(f"h{i}", table=table) for i in range(3)]
    selector = Selector([plugin(policy_conf, "filter", "ServerGroupAntiAffinityFilter")], [])
    spec = make_spec(count=2)
    spec.group = {"policy": "anti-affinity", "rules": {}, "members": [], "placed": ["x"], "hosts": {"h0": 1}}
    chosen = selector.select(table, spec)
    assert sorted(h.host for h in chosen) == ["h1", "h2"]
    spec = make_spec(count=1)
    spec.group = {"policy": "anti-affinity", "rules": {}, "members": [], "placed": [],
                  "hosts": {"h0": 1, "h1": 1, "h2": 1}}
    with pytest.raises(NoValidHost) as exc:
        selector.select(table, spec)
    assert "ServerGroupAntiAffinityFilter removed 3" in str(exc.value)
    spec.group["rules"] = {"max_server_per_host": 2}
    assert selector.select(table, spec)
    assert hosts


def test_affinity_packs_a_multi_instance_request(policy_conf):
    table = HostTable()
    for i in range(4):
        make_host(f"h{i}", table=table)
    selector = Selector([plugin(policy_conf, "filter", "ServerGroupAffinityFilter")],
                        [plugin(policy_conf, "weigher", "RAMWeigher")])
    spec = make_spec(count=3)
    spec.group = {"policy": "affinity", "rules": {}, "members": [], "placed": [], "hosts": {}}
    assert len({h.host for h in selector.select(table, spec)}) == 1


def test_availability_zone_from_aggregates_and_default_zone(policy_conf):
    table = HostTable()
    h1, h2 = make_host("h1", table=table), make_host("h2", table=table)
    table.set_aggregates([{"name": "a", "hosts": ["h1"], "availability_zone": "az1"}])
    f = plugin(policy_conf, "filter", "AvailabilityZoneFilter")
    spec = make_spec(scheduler_hints={"availability_zone": "az1"})
    assert f.host_passes(h1, spec) and not f.host_passes(h2, spec)
    spec = make_spec(scheduler_hints={"availability_zone": "nova"})
    assert not f.host_passes(h1, spec) and f.host_passes(h2, spec)


def test_metrics_weigher_missing_metric_weighs_unavailable(policy_conf):
    policy_conf.set_override("weight_setting", ["cpu.percent=-1.0"], "metrics")
    table = HostTable()
    h1, h2 = make_host("h1", table=table), make_host("h2", table=table)
    table.extra[h1.row]["metrics"] = {"cpu.percent": 30.0}
    w = plugin(policy_conf, "weigher", "MetricsWeigher")
    assert w.weigh(h1, make_spec()) == -30.0
    assert w.weigh(h2, make_spec()) == -10000.0


def test_aggregate_overrides_a_weigher_multiplier(policy_conf):
    table = HostTable()
    h1, h2 = make_host("h1", table=table), make_host("h2", table=table)
    table.set_aggregates([
        {"name": "a", "hosts": ["h1"], "metadata": {"ram_weight_multiplier": "2.0"}},
        {"name": "b", "hosts": ["h1"], "metadata": {"ram_weight_multiplier": "-1.0"}},
    ])
    w = plugin(policy_conf, "weigher", "RAMWeigher")
    assert w.weight_multiplier(h1) == -1.0 and w.weight_multiplier(h2) == 1.0
    assert list(w.multipliers(table, [0, 1])) == [-1.0, 1.0]


def test_equal_weights_and_negative_free_cpu(policy_conf):
    table = HostTable()
    h1 = make_host("h1", vcpus=4, vcpus_used=100, table=table)
    policy_conf.set_override("cpu_allocation_ratio", 16.0, "filter_scheduler")
    w = plugin(policy_conf, "weigher", "CPUWeigher")
    assert w.weigh(h1, make_spec()) == 4 * 16.0 - 100
    assert list(weighers.normalize([3.0, 3.0])) == [0.0, 0.0]


def test_io_ops_filter_counts_pending_placements(policy_conf):
    policy_conf.set_override("max_io_ops_per_host", 2, "filter_scheduler")
    table = HostTable()
    host = make_host("h1", table=table)
    f = plugin(policy_conf, "filter", "IoOpsFilter")
    assert f.host_passes(host, make_spec())
    spec = make_spec(count=2)
    for u in spec.instance_uuids:
        table.consume(host.row, u, spec.flavor)
    assert not f.host_passes(host, make_spec())


def test_json_filter(policy_conf):
    host = make_host("h1", ram=4096)
    f = plugin(policy_conf, "filter", "JsonFilter")
    assert f.host_passes(host, make_spec(scheduler_hints={"query": '[">=", "$free_ram_mb", 1024]'}))
    assert not f.host_passes(host, make_spec(scheduler_hints={"query": '["<", "$free_ram_mb", 1024]'}))
    assert not f.host_passes(host, make_spec(scheduler_hints={"query": "not json"}))


def passing(f, table, spec):
    """The hosts ``f`` passes, per host and as a vector (asserting the two agree)."""
    import numpy as np

    per_host = [view.host for view in table.views() if f.host_passes(view, spec)]
    mask = np.broadcast_to(f.filter_vector(table, np.arange(len(table)), spec), (len(table),))
    assert [view.host for view, ok in zip(table.views(), mask, strict=True) if ok] == per_host
    return per_host


def spec_of(image_id=None, extra_specs=None):
    from berth_contract.request_spec import RequestSpec

    return RequestSpec.from_wire({
        "instance_type": {"memory_mb": 1, "vcpus": 1, "root_gb": 1, "extra_specs": extra_specs or {}},
        "image": {"id": image_id, "properties": {}} if image_id else {"properties": {}},
    }, {})


@pytest.mark.parametrize(("hosts", "images", "restrict", "image", "expected"), [
    # Nova's matrix with both lists set.
    (["iso"], ["img-i"], True, "img-i", ["iso"]),
    (["iso"], ["img-i"], True, "img-o", ["plain"]),
    (["iso"], ["img-i"], False, "img-o", ["iso", "plain"]),
    # Only isolated_hosts: when restricted, they take nothing (Nova); else everything.
    (["iso"], [], True, "img-o", ["plain"]),
    (["iso"], [], False, "img-o", ["iso", "plain"]),
    # Only isolated_images: an isolated image has no host to run on.
    ([], ["img-i"], True, "img-i", []),
    ([], ["img-i"], False, "img-i", []),
    ([], ["img-i"], True, "img-o", ["iso", "plain"]),
    ([], [], True, "img-i", ["iso", "plain"]),
])
def test_isolated_hosts_filter_as_nova_with_either_list_alone(policy_conf, hosts, images, restrict, image,
                                                               expected):
    policy_conf.set_override("isolated_hosts", hosts, "filter_scheduler")
    policy_conf.set_override("isolated_images", images, "filter_scheduler")
    policy_conf.set_override("restrict_isolated_hosts_to_isolated_images", restrict, "filter_scheduler")
    table = HostTable()
    make_host("iso", table=table), make_host("plain", table=table)
    f = plugin(policy_conf, "filter", "IsolatedHostsFilter")
    assert passing(f, table, spec_of(image_id=image)) == expected


@pytest.mark.parametrize("required", [True, False])
def test_metrics_filter_wants_every_weighed_metric_whatever_required_says(policy_conf, required):
    policy_conf.set_override("weight_setting", ["cpu.percent=-1.0", "io=1"], "metrics")
    policy_conf.set_override("required", required, "metrics")
    table = HostTable()
    both, one, _none = (make_host(h, table=table) for h in ("both", "one", "none"))
    table.extra[both.row]["metrics"] = {"cpu.percent": 30.0, "io": 1.0}
    table.extra[one.row]["metrics"] = {"cpu.percent": 30.0}
    f = plugin(policy_conf, "filter", "MetricsFilter")
    assert [v.host for v in table.views() if f.host_passes(v, make_spec())] == ["both"]


def test_aggregate_extra_specs_values_are_split_on_commas(policy_conf):
    table = HostTable()
    for host in ("h24", "h8", "plain"):
        make_host(host, table=table)
    table.set_aggregates([
        {"name": "gpus", "hosts": ["h24"], "metadata": {"gpu": "2, 4"}},
        {"name": "big", "hosts": ["h8"], "metadata": {"gpu": "8"}},
    ])
    f = plugin(policy_conf, "filter", "AggregateInstanceExtraSpecsFilter")
    assert passing(f, table, spec_of(extra_specs={"gpu": "4"})) == ["h24"]
    scoped = spec_of(extra_specs={"aggregate_instance_extra_specs:gpu": ">= 3"})
    assert passing(f, table, scoped) == ["h24", "h8"]
    assert passing(f, table, spec_of(extra_specs={"gpu": "2,4"})) == []  # a piece is matched, not the whole


def image_spec(**properties):
    from berth_contract.request_spec import RequestSpec

    return RequestSpec.from_wire({"instance_type": {"memory_mb": 1, "vcpus": 1, "root_gb": 1},
                                  "image": {"properties": properties}}, {})


@pytest.mark.parametrize(("properties", "expected"), [
    ({}, ["kvm", "xen", "none"]),
    ({"hw_architecture": "x86_64"}, ["kvm", "xen"]),
    ({"hw_architecture": "AMD64"}, ["kvm", "xen"]),  # canonicalized, as Nova's Architecture does
    ({"architecture": "i386"}, ["xen"]),
    ({"img_hv_type": "xapi"}, ["xen"]),  # Nova's HVType: xapi is xen
    ({"hw_vm_mode": "pv"}, ["xen"]),  # Nova's VMMode: pv is xen
    ({"hw_vm_mode": "hv", "img_hv_type": "kvm"}, ["kvm"]),
    # Nova looks for each wanted value anywhere in a host triple, not at its position.
    ({"hw_architecture": "hvm"}, ["kvm"]),
    ({"img_hv_type": "x86_64"}, ["kvm", "xen"]),
])
def test_image_properties_filter_matches_as_nova(policy_conf, properties, expected):
    table = HostTable()
    for name, triples in (("kvm", [["x86_64", "kvm", "hvm"]]),
                          ("xen", [["x86_64", "xen", "xen"], ["i686", "xen", "xen"]]),
                          ("none", [])):
        host = make_host(name, table=table)
        host.update_from_report({"host": name, "memory_mb": 8192, "free_ram_mb": 8192, "local_gb": 100,
                                 "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "instance_uuids": [],
                                 "running_vms": 0, "supported_instances": triples})
    f = plugin(policy_conf, "filter", "ImagePropertiesFilter")
    assert passing(f, table, image_spec(**properties)) == expected


@pytest.mark.parametrize(("properties", "expected"), [
    ({"hw_architecture": "x86_64", "img_hv_requested_version": ">=5.0"}, ["v6", "none"]),
    ({"hw_architecture": "x86_64", "img_hv_requested_version": ">=4.19,<6"}, ["v4", "none"]),
    ({"hw_architecture": "x86_64", "img_hv_requested_version": "==6.1.0"}, ["v6", "none"]),
    ({"img_hv_requested_version": ">=9"}, ["v6", "v4", "none"]),  # asks no architecture: not checked (Nova)
    ({"hw_architecture": "x86_64", "hw_maxphysaddr_bits": "40"}, ["v6", "none"]),  # v4 has 39 bits
    ({"hw_architecture": "x86_64", "hw_maxphysaddr_bits": 39}, ["v6", "v4", "none"]),
])
def test_image_properties_filter_checks_the_hypervisor_version_and_address_bits(policy_conf, properties,
                                                                                 expected):
    table = HostTable()
    for name, version, bits in (("v6", 6001000, 46), ("v4", 4019000, 39), ("none", None, None)):
        report = {"host": name, "memory_mb": 8192, "free_ram_mb": 8192, "local_gb": 100,
                  "free_disk_gb": 100, "vcpus": 8, "vcpus_used": 0, "instance_uuids": [], "running_vms": 0,
                  "supported_instances": [["x86_64", "kvm", "hvm"]]}
        if version:
            report.update(hypervisor_version=version,
                          cpu_info={"arch": "x86_64", "maxphysaddr": {"mode": "passthrough", "bits": bits}})
        make_host(name, table=table).update_from_report(report)
    f = plugin(policy_conf, "filter", "ImagePropertiesFilter")
    assert passing(f, table, image_spec(**properties)) == expected


@pytest.mark.parametrize(("properties", "why"), [
    ({"img_hv_requested_version": "6.0"}, "image property img_hv_requested_version '6.0' is not a version "
                                          "predicate such as '>=6.0' or '>=5.4,<7'"),
    ({"img_hv_requested_version": ">=six"}, "image property img_hv_requested_version '>=six'"),
    ({"hw_maxphysaddr_bits": "many"}, "image property hw_maxphysaddr_bits 'many' is not a number of bits"),
    ({"hw_maxphysaddr_bits": "0"}, "image property hw_maxphysaddr_bits '0' is not a number of bits"),
])
def test_a_malformed_version_or_bit_count_refuses_the_request(policy_conf, properties, why):
    from scheduler.policy import hints

    f = plugin(policy_conf, "filter", "ImagePropertiesFilter")
    refusal = hints.unhonoured(image_spec(hw_architecture="x86_64", **properties), [f], {}, {})
    assert refusal.startswith("ImagePropertiesFilter: " + why)


def test_an_image_without_architecture_takes_the_default_one(policy_conf):
    policy_conf.set_override("image_properties_default_architecture", "i686", "filter_scheduler")
    table = HostTable()
    for name, arch in (("a64", "x86_64"), ("a32", "i686")):
        make_host(name, table=table).update_from_report({
            "host": name, "memory_mb": 8192, "free_ram_mb": 8192, "local_gb": 100, "free_disk_gb": 100,
            "vcpus": 8, "vcpus_used": 0, "instance_uuids": [], "running_vms": 0,
            "supported_instances": [[arch, "kvm", "hvm"]]})
    f = plugin(policy_conf, "filter", "ImagePropertiesFilter")
    assert passing(f, table, image_spec()) == ["a32"]
    assert passing(f, table, image_spec(hw_architecture="x86_64")) == ["a64"]


def test_an_aggregate_zone_with_commas_puts_its_hosts_in_each_zone(policy_conf):
    table = HostTable()
    for host in ("both", "one", "default"):
        make_host(host, table=table)
    table.set_aggregates([{"name": "a", "hosts": ["both"], "availability_zone": "az1, az2"},
                          {"name": "b", "hosts": ["one"], "availability_zone": "az2"}])
    f = plugin(policy_conf, "filter", "AvailabilityZoneFilter")
    for zone, expected in (("az1", ["both"]), ("az2", ["both", "one"]), ("nova", ["default"]),
                           ("az1, az2", [])):
        assert passing(f, table, make_spec(scheduler_hints={"availability_zone": zone})) == expected


def weighed_order(policy_conf, table, weigher_names, vectorized):
    """Host names, heaviest first, as the Selector weighs every host of ``table``."""
    import numpy as np

    policy_conf.set_override("weighers", weigher_names, "filter_scheduler")
    selector = Selector([], weighers.enabled_weighers(policy_conf), vectorized=vectorized)
    rows = np.arange(len(table))
    weights = selector.weigh(table, rows, make_spec())
    return [table.view(int(r)).host for r in np.argsort(-weights, kind="stable")], weights


@pytest.mark.parametrize("vectorized", [True, False])
def test_resource_weighers_scale_from_zero_as_nova(policy_conf, vectorized):
    # RAMWeigher and DiskWeigher: A 100 GB RAM / 500 GB disk free, B 60 / 1000, C 59 / 0.
    # From 0: A 100/100 + 500/1000 = 1.5, B 60/100 + 1000/1000 = 1.6, C 0.59 + 0: Nova picks B.
    # (From the least free host, A 1 + 0.5 = 1.5 would beat B 1/41 + 1 = 1.02.)
    table = HostTable()
    for name, ram_gb, disk_gb in (("A", 100, 500), ("B", 60, 1000), ("C", 59, 0)):
        make_host(name, ram=ram_gb * 1024, disk=max(disk_gb, 1), free_disk=disk_gb, table=table)
    order, weights = weighed_order(policy_conf, table, ["RAMWeigher", "DiskWeigher"], vectorized)
    assert order == ["B", "A", "C"]
    assert list(weights) == pytest.approx([1.5, 1.6, 0.59])


@pytest.mark.parametrize("vectorized", [True, False])
def test_a_weight_below_minval_counts_as_minval(policy_conf, vectorized):
    table = HostTable()
    make_host("over", ram=1000, free_ram=-500, table=table)  # overcommitted
    make_host("half", ram=1000, free_ram=500, table=table)
    _, weights = weighed_order(policy_conf, table, ["RAMWeigher"], vectorized)
    assert list(weights) == [0.0, 1.0]


@pytest.mark.parametrize("vectorized", [True, False])
def test_build_failures_weigh_with_the_multiplier_negated_as_nova(policy_conf, vectorized):
    # X: 4 failed builds, but its aggregate sets build_failure_weight_multiplier=0; Y none; Z 2.
    # Nova: failures normalized X 1, Y 0, Z 0.5, times -0, -1e6, -1e6: X 0, Y 0, Z -5e5; then
    # RAM breaks the tie for X. Negating the weight instead gives Y 1e6, Z 5e5, X 0.
    table = HostTable()
    for name, failed, ram in (("X", 4, 16384), ("Y", 0, 8192), ("Z", 2, 32768)):
        host = make_host(name, ram=ram, table=table)
        table.failed_builds[host.row] = failed
    table.set_aggregates([{"name": "lenient", "hosts": ["X"],
                           "metadata": {"build_failure_weight_multiplier": "0"}}])
    order, _ = weighed_order(policy_conf, table, ["BuildFailureWeigher", "RAMWeigher"], vectorized)
    assert order == ["X", "Y", "Z"]


@pytest.mark.parametrize("vectorized", [True, False])
@pytest.mark.parametrize(("name", "spec", "why"), [
    ("AvailabilityZoneFilter", lambda: make_spec(scheduler_hints={"availability_zone": "az9"}),
     "no host is in availability zone az9 (the hosts are in az1, az2, nova)"),
    ("AggregateInstanceExtraSpecsFilter", lambda: spec_of(extra_specs={"gpu": "16"}),
     "flavor extra spec gpu=16 matches the aggregate metadata of no host (their aggregates give gpu=2,4,8)"),
    ("AggregateInstanceExtraSpecsFilter", lambda: spec_of(extra_specs={"ssd": "true"}),
     "flavor extra spec ssd=true matches the aggregate metadata of no host "
     "(no aggregate of theirs sets ssd)"),
])
def test_when_no_host_is_left_the_reason_says_what_the_hosts_aggregates_lack(policy_conf, name, spec, why,
                                                                             vectorized):
    table = HostTable()
    for host in ("h24", "h8", "plain"):
        make_host(host, table=table)
    table.set_aggregates([
        {"name": "gpus", "hosts": ["h24"], "metadata": {"gpu": "2, 4"}, "availability_zone": "az1"},
        {"name": "big", "hosts": ["h8"], "metadata": {"gpu": "8"}, "availability_zone": "az2"},
    ])
    selector = Selector([plugin(policy_conf, "filter", name)], [], vectorized=vectorized)
    with pytest.raises(NoValidHost) as refused:
        selector.select(table, spec())
    assert str(refused.value).endswith(f"{name} removed 3 ({why}); none left")
