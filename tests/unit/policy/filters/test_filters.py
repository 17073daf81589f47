import pytest

from scheduler.policy.filters.compute import ComputeFilter
from scheduler.policy.filters.resources import CoreFilter, DiskFilter, RamFilter
from scheduler.policy.filters.retry import RetryFilter
from tests.unit.policy.fakes import make_host, make_spec


@pytest.mark.parametrize(
    ("total", "free", "requested", "passes"),
    [
        (8192, 8192, 8192, True),
        # 1.5 x 8192 = 12288 usable, but an instance never overcommits against itself (Nova):
        (8192, 8192, 10240, False),
        (8192, 0, 4096, True),  # 8192 used of a 12288 limit: 4096 left
        (8192, 0, 4097, False),
        (1000, -200, 300, True),  # overcommitted: used 1200 of a 1500 limit
        (1000, -200, 301, False),
    ],
)
def test_ram_filter_applies_the_allocation_ratio(policy_conf, total, free, requested, passes):
    policy_conf.set_override("ram_allocation_ratio", 1.5, "filter_scheduler")
    host = make_host("h", ram=total, free_ram=free)
    assert RamFilter(policy_conf).host_passes(host, make_spec(memory_mb=requested)) is passes
    assert RamFilter(policy_conf).limits(host) == {"memory_mb": total * 1.5}


@pytest.mark.parametrize(("options", "limits"), [
    ({}, {"memory_mb": 8192, "disk_gb": 100, "vcpu": 32}),  # Nova 34's initial ratios: 1.0, 1.0, 4.0
    ({"initial_ram_allocation_ratio": 1.5, "initial_cpu_allocation_ratio": 16.0},
     {"memory_mb": 12288, "disk_gb": 100, "vcpu": 128}),
    ({"ram_allocation_ratio": 2.0, "initial_ram_allocation_ratio": 1.5, "cpu_allocation_ratio": 0.0},
     {"memory_mb": 16384, "disk_gb": 100, "vcpu": 32}),  # 0.0 is unset, as in Nova
])
def test_the_allocation_ratios_are_read_as_nova_sets_them_on_a_compute_node(policy_conf, options, limits):
    for name, value in options.items():
        policy_conf.set_override(name, value, "filter_scheduler")
    host = make_host("h", ram=8192, vcpus=8)
    got = {}
    for f in (RamFilter(policy_conf), DiskFilter(policy_conf), CoreFilter(policy_conf)):
        got.update(f.limits(host))
    assert got == limits


def test_a_nova_conf_sets_the_ratios_in_default(tmp_path):
    from oslo_config import cfg

    from scheduler.conf import filter_scheduler, groups

    nova_conf = tmp_path / "nova.conf"
    nova_conf.write_text("[DEFAULT]\ninitial_cpu_allocation_ratio = 16.0\nram_allocation_ratio = 1.5\n")
    conf = cfg.ConfigOpts()
    groups.register_module(conf, filter_scheduler)
    conf(["--config-file", str(nova_conf)])
    assert [filter_scheduler.allocation_ratio(conf, r) for r in ("cpu", "ram", "disk")] == [16.0, 1.5, 1.0]


def test_ram_filter_reads_its_ratio(policy_conf):
    policy_conf.set_override("ram_allocation_ratio", 1.0, "filter_scheduler")
    host = make_host("h", ram=4096)
    assert not RamFilter(policy_conf).host_passes(host, make_spec(memory_mb=4097))
    assert RamFilter(policy_conf).limits(host) == {"memory_mb": 4096}


@pytest.mark.parametrize(("free", "root_gb", "passes"), [(10, 10, True), (10, 11, False), (-5, 1, False)])
def test_disk_filter(policy_conf, free, root_gb, passes):
    host = make_host("h", disk=100, free_disk=free)
    assert DiskFilter(policy_conf).host_passes(host, make_spec(root_gb=root_gb)) is passes
    assert DiskFilter(policy_conf).limits(host) == {"disk_gb": 100}


def test_disk_filter_never_overcommits_an_instance_against_itself(policy_conf):
    policy_conf.set_override("disk_allocation_ratio", 2.0, "filter_scheduler")
    empty = make_host("h", disk=100, free_disk=100)
    assert DiskFilter(policy_conf).host_passes(empty, make_spec(root_gb=100))
    assert not DiskFilter(policy_conf).host_passes(empty, make_spec(root_gb=101))  # 200 under the ratio
    half = make_host("h", disk=100, free_disk=50)
    assert DiskFilter(policy_conf).host_passes(half, make_spec(root_gb=100))  # 50 used of 200


def test_disk_filter_counts_ephemeral_disk(policy_conf):
    from berth_contract.request_spec import RequestSpec

    spec = RequestSpec.from_wire(
        {"instance_type": {"memory_mb": 1, "vcpus": 1, "root_gb": 5, "ephemeral_gb": 6}}, {}
    )
    assert not DiskFilter(policy_conf).host_passes(make_host("h", disk=10), spec)


def test_core_filter_overcommits_against_others_only(policy_conf):
    policy_conf.set_override("cpu_allocation_ratio", 16.0, "filter_scheduler")
    host = make_host("h", vcpus=4, vcpus_used=60)  # limit 4 * 16 = 64
    core = CoreFilter(policy_conf)
    assert core.host_passes(host, make_spec(vcpus=4))
    assert core.limits(host) == {"vcpu": 64}
    assert not core.host_passes(host, make_spec(vcpus=5))  # 5 > 4 real CPUs
    assert not core.host_passes(make_host("h", vcpus=8, vcpus_used=124), make_spec(vcpus=5))


def test_core_filter_refuses_hosts_that_report_no_cpus(policy_conf):
    # Nova's CoreFilter passed them ("fail safe"); Berth knowingly refuses them.
    host = make_host("h", vcpus=0)
    assert not CoreFilter(policy_conf).host_passes(host, make_spec(vcpus=1))
    assert CoreFilter(policy_conf).limits(host) == {}


def test_compute_filter_drops_silent_and_disabled_hosts(policy_conf):
    import time

    down_time = policy_conf.scheduler.service_down_time
    fresh = make_host("fresh")
    silent = make_host("silent", now=time.monotonic() - down_time - 1)
    disabled = make_host("disabled")
    disabled.disabled = True
    compute = ComputeFilter(policy_conf)
    spec = make_spec()
    assert [h.host for h in (fresh, silent, disabled) if compute.host_passes(h, spec)] == ["fresh"]


def test_retry_filter_skips_hosts_already_tried(policy_conf):
    spec = make_spec(retry={"num_attempts": 1, "hosts": [["a", "a"]]})
    hosts = [make_host("a"), make_host("b")]
    assert [h.host for h in hosts if RetryFilter(policy_conf).host_passes(h, spec)] == ["b"]
