"""A flavor booted from a volume, as Nova's users write it (``resources:DISK_GB=0``, a root disk
of 20 GB), on a host of 10 GB of disk: the scheduler places it there, the agent claims it, and
neither counts it on the host's disk. Real processes: RabbitMQ, PostgreSQL, a scheduler, an agent."""

import pytest

from tests.functional.fleet import Fleet, temporary_database, temporary_vhost

pytestmark = pytest.mark.functional


def test_a_flavor_booted_from_a_volume_fits_a_host_whose_disk_is_smaller_than_its_root_disk(tmp_path):
    with temporary_database() as url, temporary_vhost() as transport_url:
        fleet = Fleet(tmp_path, url, transport_url, compute_agent__reserved_host_disk_mb=0)
        try:
            fleet.start_schedulers(["sched-1"])
            fleet.start_agent("small-disk", fake_local_gb=10)
            fleet.wait_hosts_up(["small-disk"])
            for name, properties in (("vol", ["--property", "resources:DISK_GB=0"]), ("local", [])):
                created = fleet.cli("flavor", "create", name, "--ram", "512", "--disk", "20", "--vcpus", "1",
                                    *properties)
                assert created.returncode == 0, created.stderr
            booted = fleet.cli("boot", "--flavor", "vol", "--name", "from-volume", "--wait", timeout=180)
            assert booted.returncode == 0, booted.stdout + booted.stderr
            [instance] = named(fleet, "from-volume")
            assert (instance["state"], instance["host"]) == ("ACTIVE", "small-disk")
            fleet.wait(lambda: fleet.hosts()["small-disk"]["memory_mb_used"] >= 512, 30,
                       "the agent to report the instance")
            host = fleet.hosts()["small-disk"]
            assert (host["local_gb_used"], host["free_disk_gb"]) == (0, 10)
            # the same root disk on the host's own disk does not fit, and the refusal says why
            refused = fleet.cli("boot", "--flavor", "local", "--name", "on-local-disk", "--wait", timeout=180)
            assert refused.returncode == 1
            [failed] = named(fleet, "on-local-disk")
            assert failed["state"] == "ERROR" and "DiskFilter removed 1" in failed["fault_reason"]
        finally:
            fleet.close()


def named(fleet, name):
    return [i for i in fleet.instances(include_deleted=False).values() if i["display_name"] == name]
