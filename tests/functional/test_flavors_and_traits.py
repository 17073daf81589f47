"""Today's flavors end to end: agents reporting GPUs and traits, flavors made with ``berth flavor``,
and placements that honour them, on real processes, the real RabbitMQ and PostgreSQL.

gpu-a has the only GPU (VGPU:1) and CUSTOM_SSD; plain-b has neither; iso-c is the only host
with CUSTOM_ISO and sits in an aggregate that requires it (an isolated aggregate)."""

import pytest

from scheduler.client import SchedulerClient
from tests.functional.fleet import Fleet, temporary_database, temporary_vhost
from tests.functional.test_placement_policies import boot, delete, fault, ok

SIZE = {"fake_memory_mb": 16384, "fake_local_gb": 200, "fake_vcpus": 8}
AGENTS = {
    "gpu-a": {"resources": "VGPU:1", "traits": "CUSTOM_SSD"},
    "plain-b": {},
    "iso-c": {"traits": "CUSTOM_ISO"},
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flavors")
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp, url, transport_url, compute_agent__fake_build_time=0.02,
                      filter_scheduler__enabled_filters=(
                          "ComputeFilter,RamFilter,DiskFilter,CoreFilter,ImagePropertiesFilter,"
                          "ResourceClassFilter,TraitsFilter,IsolatedAggregateFilter"))
        try:
            fleet.start_scheduler()
            quick = SchedulerClient(fleet.transport, timeout=2)
            fleet.wait(lambda: quick.list_hosts({}) is not None, 60, "the scheduler to answer")
            for host, options in AGENTS.items():
                fleet.start_agent(host, **SIZE, **options)
            fleet.wait_hosts_up(AGENTS)
            ok(fleet.cli("aggregate", "create", "isolated"))
            ok(fleet.cli("aggregate", "add-host", "isolated", "iso-c"))
            ok(fleet.cli("aggregate", "set-metadata", "isolated", "trait:CUSTOM_ISO=required"))
            for name, prop in (("gpu.small", "resources:VGPU=1"), ("no-ssd", "trait:CUSTOM_SSD=forbidden"),
                               ("iso.small", "trait:CUSTOM_ISO=required")):
                ok(fleet.cli("flavor", "create", name, "--ram", "512", "--disk", "1", "--vcpus", "1",
                             "--property", prop))
            yield fleet
        finally:
            fleet.close()


def boot_flavor(fleet, flavor, *args, count=1, expect="ACTIVE"):
    """boot() with a stored flavor in place of m1.tiny (the last --flavor given wins)."""
    return boot(fleet, "--flavor", flavor, *args, count=count, expect=expect)


def test_a_gpu_goes_only_where_one_is_free_and_is_refused_with_the_reason_when_none_is(fleet):
    [(first, host)] = boot_flavor(fleet, "gpu.small").items()
    assert host == "gpu-a"
    [(second, _)] = boot_flavor(fleet, "gpu.small", expect="ERROR").items()
    reason = fault(fleet, second)
    assert "3 hosts considered" in reason and "ResourceClassFilter removed" in reason, reason
    delete(fleet, [first, second])
    # Given back: the next GPU instance finds it free again.
    [(third, host)] = boot_flavor(fleet, "gpu.small").items()
    assert host == "gpu-a"
    shown = ok(fleet.cli("flavor", "show", "gpu.small", "-f", "json"))
    assert '"resources:VGPU": "1"' in shown
    delete(fleet, [third])


def test_a_forbidden_trait_is_avoided_and_an_isolated_aggregate_takes_only_its_own(fleet):
    placed = boot_flavor(fleet, "no-ssd", count=3)
    assert set(placed.values()) == {"plain-b"}  # not gpu-a (CUSTOM_SSD), not iso-c (isolated)
    plain = boot(fleet, count=6)
    assert "iso-c" not in plain.values() and set(plain.values()) == {"gpu-a", "plain-b"}
    isolated = boot_flavor(fleet, "iso.small", count=2)
    assert set(isolated.values()) == {"iso-c"}
    delete(fleet, [*placed, *plain, *isolated])


def test_an_image_requiring_a_trait_no_host_has_is_refused_naming_the_filter(fleet):
    [(nowhere, _)] = boot(fleet, "--image-property", "trait:CUSTOM_NOWHERE=required", expect="ERROR").items()
    assert "TraitsFilter removed 3" in fault(fleet, nowhere)
    delete(fleet, [nowhere])


def test_a_flavor_with_an_extra_spec_nothing_reads_is_refused_naming_it(fleet):
    made = fleet.cli("flavor", "create", "odd", "--ram", "512", "--disk", "1", "--vcpus", "1",
                     "--property", "colour:shade=blue")
    assert made.returncode == 1
    assert "extra spec colour:shade: no enabled filter reads it" in made.stderr
    assert "Traceback" not in made.stderr
    assert "odd" not in ok(fleet.cli("flavor", "list", "-f", "value", "-c", "name")).split()
    # The same key sent in a request by a caller that does not use stored flavors: refused, not placed.
    [(refused, host)] = boot(fleet, "--image-property", "colour=blue", expect="ERROR").items()
    assert host == "-"
    assert "image property colour: no enabled filter reads it" in fault(fleet, refused)
    delete(fleet, [refused])
