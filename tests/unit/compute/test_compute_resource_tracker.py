import datetime

import pytest

from compute_agent.resource_tracker import ClaimFailed, ResourceTracker

SMALL = {"memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 5, "vcpus": 2}
TOTALS = {"memory_mb": 8192, "local_gb": 100, "vcpus": 4}
RECORD_KEYS = {
    "host", "nodename", "hypervisor_type", "memory_mb", "memory_mb_used", "free_ram_mb",
    "local_gb", "local_gb_used", "free_disk_gb", "vcpus", "vcpus_used", "running_vms",
    "instance_uuids", "reserved_host_memory_mb", "reserved_host_disk_mb",
    "reserved_host_cpus", "reported_at", "started_at", "report_seq", "image_properties", "stats", "version",
    # for the placement filters and weighers (issue 3)
    "cpu_arch", "vm_modes", "io_workload", "failed_builds", "metrics",
    # resource classes and traits (issue 26)
    "inventories", "usages", "traits",
}  # fmt: skip


def tracker(**kwargs):
    kwargs.setdefault("reserved_host_memory_mb", 512)
    kwargs.setdefault("reserved_host_disk_mb", 2048)
    kwargs.setdefault("reserved_host_cpus", 1)
    return ResourceTracker("h1", dict(TOTALS), **kwargs)


def test_empty_host_counts_only_reserves():
    report = tracker().report()
    assert set(report) == RECORD_KEYS
    assert report["host"] == report["nodename"] == "h1"
    assert report["hypervisor_type"] == "fake"
    assert (report["memory_mb"], report["memory_mb_used"], report["free_ram_mb"]) == (
        8192,
        512,
        7680,
    )
    assert (report["local_gb"], report["local_gb_used"], report["free_disk_gb"]) == (100, 2, 98)
    assert (report["vcpus"], report["vcpus_used"]) == (4, 1)
    assert report["running_vms"] == 0
    assert report["instance_uuids"] == []
    assert report["reserved_host_memory_mb"] == 512
    assert report["reserved_host_disk_mb"] == 2048
    assert report["reserved_host_cpus"] == 1


def test_used_is_flavors_plus_reserves():
    rt = tracker()
    assert rt.claim("b", SMALL) is True
    assert rt.claim("a", dict(SMALL, memory_mb=1024, ephemeral_gb=0, vcpus=1)) is True
    report = rt.report()
    assert report["memory_mb_used"] == 512 + 2048 + 1024
    assert report["free_ram_mb"] == 8192 - 3584
    assert report["local_gb_used"] == 2 + 25 + 20
    assert report["free_disk_gb"] == 100 - 47
    assert report["vcpus_used"] == 1 + 2 + 1
    assert report["running_vms"] == 2
    assert report["instance_uuids"] == ["a", "b"]


def test_fractional_disk_reserve():
    rt = tracker(reserved_host_disk_mb=512)
    assert rt.report()["local_gb_used"] == 0.5
    assert rt.report()["free_disk_gb"] == 99.5


def test_free_goes_negative_under_overcommit():
    rt = tracker()
    big = {"memory_mb": 4096, "root_gb": 80, "ephemeral_gb": 0, "vcpus": 4}
    limits = {"memory_mb": 8192 * 1.5, "disk_gb": 200, "vcpu": 64}
    assert rt.claim("x", big, limits)
    assert rt.claim("y", big, limits)
    report = rt.report()
    assert report["free_ram_mb"] == 8192 - 512 - 2 * 4096 < 0
    assert report["free_disk_gb"] == 100 - 2 - 160 < 0
    assert report["vcpus_used"] == 9


@pytest.mark.parametrize(
    "flavor, limits, resource, message",
    [
        (
            {"memory_mb": 4096},
            {"memory_mb": 6144},
            "memory",
            "Insufficient memory: requested 4096 MB, free 3584 MB of limit 6144 MB",
        ),
        (
            {"root_gb": 40, "ephemeral_gb": 10},
            {"disk_gb": 70},
            "disk",
            "Insufficient disk: requested 50 GB, free 43 GB of limit 70 GB",
        ),
        ({"vcpus": 4}, {"vcpu": 6}, "vcpu", "Insufficient vcpu: requested 4 VCPU, free 3 VCPU"),
    ],
)
def test_refused_claim_names_the_resource(flavor, limits, resource, message):
    rt = tracker()
    rt.claim("first", SMALL)  # memory 2560 used, disk 27, vcpus 3
    with pytest.raises(ClaimFailed) as info:
        rt.claim("second", flavor, limits)
    assert info.value.resource == resource
    assert str(info.value).startswith(message)
    assert "second" not in rt
    assert rt.report()["instance_uuids"] == ["first"]


def test_claim_that_exactly_fits_passes():
    rt = tracker()
    assert rt.claim("x", {"memory_mb": 7680}, {"memory_mb": 8192})
    with pytest.raises(ClaimFailed):
        rt.claim("y", {"memory_mb": 1}, {"memory_mb": 8192})


def test_missing_or_none_limit_is_unlimited():
    rt = tracker()
    huge = {"memory_mb": 10**6, "root_gb": 10**5, "ephemeral_gb": 0, "vcpus": 1000}
    assert rt.claim("a", huge)
    assert rt.claim("b", huge, {})
    assert rt.claim("c", huge, {"memory_mb": None, "disk_gb": None, "vcpu": None})
    # Only the memory limit is set: disk and vcpus stay unlimited.
    with pytest.raises(ClaimFailed, match="memory"):
        rt.claim("d", huge, {"memory_mb": 8192})
    assert rt.claim("e", huge, {"disk_gb": None})


def test_duplicate_claim_is_a_no_op():
    rt = tracker()
    assert rt.claim("a", SMALL) is True
    before = rt.report()
    assert rt.claim("a", dict(SMALL, memory_mb=99999), {"memory_mb": 1}) is False
    after = rt.report()
    assert after["memory_mb_used"] == before["memory_mb_used"]
    assert after["instance_uuids"] == ["a"]


def test_free_releases_and_unknown_is_a_no_op():
    rt = tracker()
    rt.claim("a", SMALL)
    assert rt.free("a") is True
    assert rt.free("a") is False
    assert rt.free("never") is False
    report = rt.report()
    assert report["memory_mb_used"] == 512
    assert report["instance_uuids"] == []


def test_missing_flavor_keys_count_as_zero():
    rt = tracker()
    rt.claim("a", {"memory_mb": 128, "extra_specs": {"x": "y"}, "name": "tiny"})
    report = rt.report()
    assert report["memory_mb_used"] == 640
    assert report["vcpus_used"] == 1


def test_timestamps_are_iso_utc():
    rt = tracker(started_at="2024-01-01T00:00:00.000000Z")
    report = rt.report()
    assert report["started_at"] == "2024-01-01T00:00:00.000000Z"
    assert report["reported_at"].endswith("Z")
    when = datetime.datetime.fromisoformat(report["reported_at"])
    assert abs(datetime.datetime.now(datetime.UTC) - when) < datetime.timedelta(minutes=5)


def test_set_totals():
    rt = tracker()
    rt.set_totals({"memory_mb": 1024, "local_gb": 10, "vcpus": 1})
    report = rt.report()
    assert report["free_ram_mb"] == 512
    assert report["free_disk_gb"] == 8


def test_reports_are_numbered_so_that_an_old_one_can_be_told_from_a_new_one():
    rt = tracker()
    assert [rt.report()["report_seq"] for _ in range(3)] == [1, 2, 3]


VOLUME_BOOTED = {"memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0, "vcpus": 2,
                 "extra_specs": {"resources:DISK_GB": "0"}}


def test_a_flavor_booted_from_a_volume_takes_no_local_disk_in_claims_or_reports():
    # 10 GB of disk, a flavor of root_gb 20 whose extra specs ask no local disk (Nova's way of
    # writing boot-from-volume flavors): the scheduler chose this host, the agent takes it
    rt = ResourceTracker("h1", {"memory_mb": 8192, "local_gb": 10, "vcpus": 4})
    assert rt.claim("vol", VOLUME_BOOTED, {"memory_mb": 8192, "disk_gb": 10, "vcpu": 4})
    report = rt.report()
    assert (report["local_gb_used"], report["free_disk_gb"]) == (0, 10)
    assert report["memory_mb_used"] == 2048
    # a resize to another such flavor asks no disk either; one with local disk does
    assert rt.resize("vol", dict(VOLUME_BOOTED, memory_mb=4096), {"memory_mb": 8192, "disk_gb": 10})
    assert rt.report()["local_gb_used"] == 0
    with pytest.raises(ClaimFailed, match="Insufficient disk: requested 20 GB, free 10 GB"):
        rt.resize("vol", {"memory_mb": 4096, "root_gb": 20, "vcpus": 2}, {"disk_gb": 10})


def test_memory_is_claimed_and_reported_as_the_flavors_amount():
    rt = tracker()
    rt.claim("big", {"memory_mb": 1024, "root_gb": 1, "vcpus": 1,
                     "extra_specs": {"resources:MEMORY_MB": "4096"}})
    assert rt.report()["memory_mb_used"] == 4096 + rt.reserved_host_memory_mb
