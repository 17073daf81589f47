"""What hosts are (cpu_info, hypervisor version, address), and the filters that read it as Nova's do."""

import json
import uuid

import pytest

from berth_contract.host_report import HostReport
from compute_agent.driver import host_facts
from scheduler.exception import InvalidRequest
from scheduler.policy.host_state import HostTable
from tests.unit.policy.test_catalog import passing, plugin, spec_of


def report(host, **facts):
    return {"host": host, "nodename": host + ".node", "memory_mb": 8192, "free_ram_mb": 8192,
            "local_gb": 100, "free_disk_gb": 40, "vcpus": 8, "vcpus_used": 0, "instance_uuids": [],
            "running_vms": 0, **facts}


@pytest.fixture
def fleet():
    table = HostTable()
    hosts = {
        "new": report("new", cpu_info={"arch": "x86_64", "features": ["avx", "avx2", "sse2"],
                                       "maxphysaddr": {"bits": 46}},
                      hypervisor_version=6001000, host_ip="10.0.1.5",
                      stats={"num_proj_p1": 2, "io_workload": 1}, metrics={"cpu.percent": 30}),
        "old": report("old", cpu_info={"arch": "x86_64", "features": ["sse2"]}, hypervisor_version=4019000,
                      host_ip="10.0.2.7", free_disk_gb=5, stats={"num_proj_p1": "1", "io_workload": 0},
                      metrics={"cpu.percent": 72.5}),
        "arm": report("arm", cpu_info={"arch": "aarch64", "features": ["neon"]}),
        "bare": report("bare"),
    }
    for name, resources in hosts.items():
        table.update_from_report(table.add(name), HostReport.from_wire(resources, name), now=0.0)
    return table


@pytest.mark.parametrize(("extra_specs", "expected"), [
    ({"capabilities:cpu_info:features": "<in> avx2"}, ["new"]),
    ({"capabilities:cpu_info:arch": "s== x86_64"}, ["new", "old"]),
    ({"capabilities:hypervisor_version": ">= 5000000"}, ["new"]),
    ({"capabilities:free_disk_mb": ">= 10240"}, ["new", "arm", "bare"]),  # 40 GB = 40960 MB; 5 GB is not
    ({"capabilities:hypervisor_hostname": "s== arm.node"}, ["arm"]),
    ({"capabilities:host_ip": "s== 10.0.2.7"}, ["old"]),
    ({"hw:maxphysaddr_bits": "40"}, ["new"]),  # capabilities:cpu_info:maxphysaddr:bits >= 40
    # Unscoped: read when Nova's HostState has the attribute, ignored when not.
    ({"free_ram_mb": ">= 4096"}, ["new", "old", "arm", "bare"]),
    ({"free_ram_mb": ">= 9000"}, []),
    ({"ssd": "true"}, ["new", "old", "arm", "bare"]),
    # Other scopes are for other filters; unknown attributes and Berth's own names read as nothing.
    ({"aggregate_instance_extra_specs:ssd": "true", "hw:cpu_policy": "dedicated"},
     ["new", "old", "arm", "bare"]),
    ({"capabilities:free_disk_gb": ">= 1"}, []),
    # A name that is no attribute reads the compute node's stats (Nova's fallback); unscoped, only a
    # host that has the stat is checked.
    ({"capabilities:num_proj_p1": ">= 2"}, ["new"]),
    ({"capabilities:stats:num_proj_p1": "1"}, ["old"]),
    ({"num_proj_p1": "== 1"}, ["old", "arm", "bare"]),
    ({"capabilities:io_workload": "0"}, ["old"]),
    ({"capabilities:_table": "x"}, []),
    # Beyond Nova: a metric the agent reports; a host without it fails.
    ({"capabilities:metrics:cpu.percent": "<= 50"}, ["new"]),
    ({"capabilities:metrics:cpu.percent": "72.5"}, ["old"]),
    ({"capabilities:metrics:cpu.percent": "s== 30"}, ["new"]),
    ({"capabilities:metrics:nothing": ">= 0"}, []),
    ({"capabilities:cpu_info:features:x": "1"}, []),
])
def test_compute_capabilities_filter_reads_hosts_as_nova(policy_conf, fleet, extra_specs, expected):
    f = plugin(policy_conf, "filter", "ComputeCapabilitiesFilter")
    assert passing(f, fleet, spec_of(extra_specs=extra_specs)) == expected


def query_spec(query):
    from berth_contract.request_spec import RequestSpec

    return RequestSpec.from_wire({"instance_type": {"memory_mb": 1, "vcpus": 1, "root_gb": 1}},
                                 {"scheduler_hints": {"query": json.dumps(query)}})


@pytest.mark.parametrize(("query", "expected"), [
    ([">=", "$free_disk_mb", 10240], ["new", "arm", "bare"]),
    (["=", "$hypervisor_hostname", "old.node"], ["old"]),
    ([">", "$hypervisor_version", 5000000], ["new"]),
    (["=", "$host_ip", "10.0.1.5"], ["new"]),
    # Not Nova's attributes: dropped from the arguments, so the comparison has one and fails.
    ([">=", "$free_disk_gb", 1], []),
    (["=", "$_table", None], []),
])
def test_json_filter_reads_any_of_novas_host_attributes_and_nothing_else(policy_conf, fleet, query, expected):
    f = plugin(policy_conf, "filter", "JsonFilter")
    assert [v.host for v in fleet.views() if f.host_passes(v, query_spec(query))] == expected


@pytest.mark.parametrize(("facts", "message"), [
    ({"host_ip": "10.0.0.300"}, "host_ip must be an IP address"),
    ({"host_ip": 5}, "host_ip must be an IP address"),
    ({"cpu_info": "x86_64"}, "cpu_info must be an object"),
    ({"cpu_info": {"features": "avx"}}, "cpu_info['features'] is not what a cpu_info holds"),
    ({"cpu_info": {"flags": []}}, "cpu_info['flags']"),
    ({"hypervisor_version": -1}, "hypervisor_version must be between"),
    ({"hypervisor_version": "6.1"}, "hypervisor_version must be a number"),
])
def test_a_report_with_facts_that_are_not_what_nova_keeps_is_refused(facts, message):
    with pytest.raises(InvalidRequest, match=message.replace("[", r"\[").replace("]", r"\]")):
        HostReport.from_wire(report("h", **facts), "h")


def test_versions_are_counted_as_nova_counts_them():
    assert host_facts.version_to_int("6.1.0-28-amd64") == 6_001_000
    assert host_facts.version_to_int("4.19") == 4_019_000
    assert host_facts.version_to_int("10.2.3.4") == 10_002_003


def test_the_host_driver_reads_the_cpu_from_the_machine(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\n"
                       "flags\t\t: fpu sse2 avx2\naddress sizes\t: 46 bits physical, 48 bits virtual\n\n"
                       "processor\t: 1\nflags\t\t: fpu\n")
    info = host_facts.cpu_info(arch="x86_64", cpuinfo_path=cpuinfo)
    assert info["arch"] == "x86_64" and info["vendor"] == "GenuineIntel" and info["model"] == "Xeon"
    assert info["features"] == ["avx2", "fpu", "sse2"]
    assert info["maxphysaddr"] == {"mode": "passthrough", "bits": 46}
    HostReport.from_wire(report("h", cpu_info=info), "h")
    assert host_facts.host_ip("192.0.2.10") == "192.0.2.10"


def hints_spec(**hints):
    from berth_contract.request_spec import RequestSpec

    return RequestSpec.from_wire({"instance_type": {"memory_mb": 1, "vcpus": 1, "root_gb": 1}},
                                 {"scheduler_hints": hints})


@pytest.mark.parametrize(("hints", "expected"), [
    ({}, ["new", "old", "arm", "bare"]),
    ({"build_near_host_ip": "10.0.1.200"}, ["new"]),  # 10.0.1.0/24
    ({"build_near_host_ip": "10.0.1.200", "cidr": "/16"}, ["new", "old"]),  # the two that report one
    ({"cidr": "/8"}, ["new", "old", "arm", "bare"]),  # no address to be near: no filtering (Nova)
])
def test_simple_cidr_affinity_keeps_hosts_near_the_address(policy_conf, fleet, hints, expected):
    f = plugin(policy_conf, "filter", "SimpleCIDRAffinityFilter")
    assert passing(f, fleet, hints_spec(**hints)) == expected


def test_a_cidr_hint_that_is_no_network_is_refused(policy_conf):
    f = plugin(policy_conf, "filter", "SimpleCIDRAffinityFilter")
    with pytest.raises(ValueError, match="build_near_host_ip and cidr"):
        f.check_hints(hints_spec(build_near_host_ip="10.0.1.5", cidr="/33"))


@pytest.mark.parametrize("vectorized", [True, False])
def test_newer_hypervisors_weigh_more(policy_conf, fleet, vectorized):
    import numpy as np

    from scheduler.policy.selection import Selector

    w = plugin(policy_conf, "weigher", "HypervisorVersionWeigher")
    weights = Selector([], [w], vectorized=vectorized).weigh(fleet, np.arange(len(fleet)), hints_spec())
    # Versions 6001000, 4019000, none, none; scaled from the smallest (Nova's weigher has no minval).
    assert list(weights) == pytest.approx([1.0, 4019000 / 6001000, 0.0, 0.0])


def image_request(**properties):
    from berth_contract.request_spec import RequestSpec

    return RequestSpec.from_wire({"instance_type": {"memory_mb": 1, "vcpus": 1, "root_gb": 1},
                                  "image": {"properties": properties}}, {})


@pytest.mark.parametrize(("setting", "expected"), [
    # Request os_distro=ubuntu, hw_machine_type=q35. "pack": 3 ubuntu + 1 q35 = 4; "mixed": 1 + 0 = 1.
    ([], [4.0, 1.0, 0.0]),
    # os_distro=1, hw_machine_type=-1: pack 3 * 1 + 1 * -1 = 2; mixed 1 * 1 = 1; unnamed properties weigh 0.
    (["os_distro=1", "hw_machine_type=-1"], [2.0, 1.0, 0.0]),
    (["hw_machine_type=2"], [2.0, 0.0, 0.0]),
])
def test_image_properties_weigher_counts_alike_instances_as_nova(policy_conf, setting, expected):
    policy_conf.set_override("image_props_weight_multiplier", 1.0, "filter_scheduler")
    policy_conf.set_override("image_props_weight_setting", setting, "filter_scheduler")
    table = HostTable()
    counts = {
        "pack": {"os_distro": {"ubuntu": 3, "debian": 2}, "hw_machine_type": {"q35": 1}},
        "mixed": {"os_distro": {"ubuntu": 1}, "hw_machine_type": {"pc": 4}},
        "empty": {},
    }
    for name, image_properties in counts.items():
        resources = report(name, image_properties=image_properties)
        table.update_from_report(table.add(name), HostReport.from_wire(resources, name), now=0.0)
    w = plugin(policy_conf, "weigher", "ImagePropertiesWeigher")
    spec = image_request(os_distro="ubuntu", hw_machine_type="q35")
    import numpy as np

    assert [w.weigh(v, spec) for v in table.views()] == expected
    assert list(w.weigh_vector(table, np.arange(3), spec)) == expected
    policy_conf.set_override("image_props_weight_multiplier", 0.0, "filter_scheduler")
    assert w.weigh(table.view(0), spec) == 0.0 and w.weigh_vector(table, np.arange(3), spec) is None


def test_agents_count_the_image_properties_of_the_instances_they_hold():
    from compute_agent.resource_tracker import ResourceTracker

    tracker = ResourceTracker("h", {"memory_mb": 8192, "local_gb": 100, "vcpus": 8})
    flavor = {"memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1}
    a, b, c = (str(uuid.UUID(int=i)) for i in (1, 2, 3))
    tracker.claim(a, flavor, image_properties={"os_distro": "ubuntu", "hw_machine_type": "q35"})
    tracker.claim(b, flavor, image_properties={"os_distro": "ubuntu"})
    tracker.claim(c, flavor)
    assert tracker.report()["image_properties"] == {"os_distro": {"ubuntu": 2}, "hw_machine_type": {"q35": 1}}
    tracker.free(a)
    assert tracker.report()["image_properties"] == {"os_distro": {"ubuntu": 1}}
    HostReport.from_wire(tracker.report(), "h")


def test_agents_report_nova_compute_node_stats():
    from compute_agent.resource_tracker import ResourceTracker

    tracker = ResourceTracker("h", {"memory_mb": 8192, "local_gb": 100, "vcpus": 8})
    flavor = {"memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1}
    a, b, c = (str(uuid.UUID(int=i)) for i in (1, 2, 3))
    tracker.claim(a, flavor, image_properties={"os_type": "linux"}, project_id="p1")
    tracker.claim(b, flavor, image_properties={"os_type": "windows"}, project_id="p1")
    tracker.claim(c, flavor, project_id="p2\n")  # not a name the scheduler takes: left out, not sent
    tracker.io_workload = 1
    assert tracker.report()["stats"] == {
        "num_instances": 3, "io_workload": 1, "failed_builds": 0, "num_vm_active": 2, "num_vm_building": 1,
        "num_task_spawning": 1, "num_proj_p1": 2, "num_os_type_linux": 1, "num_os_type_windows": 1}
    HostReport.from_wire(tracker.report(), "h")
    tracker.free(b)
    stats = tracker.report()["stats"]
    assert stats["num_proj_p1"] == 1 and "num_os_type_windows" not in stats


@pytest.mark.parametrize("stats", [[1], {"n": True}, {"n": 1.5}, {"": 1}, {"n": "x" * 256}])
def test_a_report_with_malformed_stats_is_refused(stats):
    with pytest.raises(InvalidRequest, match="stats must map"):
        HostReport.from_wire(report("h", stats=stats), "h")


@pytest.mark.parametrize("query", [["frobnicate", "$free_ram_mb", 1],
                                   ["and", [">=", "$free_ram_mb", 1], ["~", 1]]])
def test_a_query_with_an_operator_nova_does_not_know_is_refused(policy_conf, query):
    f = plugin(policy_conf, "filter", "JsonFilter")
    with pytest.raises(ValueError, match="scheduler hint query: unknown operator"):
        f.check_hints(query_spec(query))


def test_an_empty_string_in_a_query_is_dropped_as_nova_drops_it(policy_conf, fleet):
    f = plugin(policy_conf, "filter", "JsonFilter")
    assert [v.host for v in fleet.views() if f.host_passes(v, query_spec(["=", "", ""]))] == []


def test_a_stat_a_host_stops_reporting_is_no_longer_read(policy_conf, fleet):
    f = plugin(policy_conf, "filter", "ComputeCapabilitiesFilter")
    spec = spec_of(extra_specs={"capabilities:num_proj_p1": ">= 1"})
    assert passing(f, fleet, spec) == ["new", "old"]
    fleet.update_from_report(fleet.index["new"], report("new", stats={"io_workload": 0}), now=1.0)
    fleet.update_from_report(fleet.index["bare"], report("bare", stats={"num_proj_p1": 3}), now=1.0)
    assert passing(f, fleet, spec) == ["old", "bare"]
    fleet.update_from_report(fleet.index["old"], report("old"), now=1.0)
    assert passing(f, fleet, spec) == ["bare"]
    assert fleet.stats_by_name["num_proj_p1"] == {fleet.index["bare"]: "3"}
