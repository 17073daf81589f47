import json
import os
import threading

import pytest

from compute_agent import conf as agent_conf
from compute_agent import driver as drivers
from compute_agent.instance_store import InstanceStore, InstanceStoreError


def test_options_have_help_and_defaults(conf):
    listed = {group.name: opts for group, opts in agent_conf.list_opts()}
    assert set(listed) == {"compute_agent", "fake", "qemu"}
    for opt in [*listed["compute_agent"], *listed["fake"], *listed["qemu"]]:
        assert opt.help, opt.name
    c = conf.compute_agent
    assert (c.reserved_host_memory_mb, c.reserved_host_disk_mb, c.reserved_host_cpus) == (512, 0, 0)
    assert (c.report_interval, c.report_on_change, c.report_min_interval) == (10, True, 0.2)
    assert (conf.fake.memory_mb, conf.fake.local_gb, conf.fake.vcpus) == (32768, 1024, 16)
    assert (conf.fake.build_time, c.nodename) == (0.0, None)


def test_fake_driver_totals(conf):
    conf.set_override("memory_mb", 4096, "fake")
    driver = drivers.load_driver(conf)
    assert isinstance(driver, drivers.FakeDriver)
    assert driver.hypervisor_type == "fake"
    assert driver.get_totals() == {"memory_mb": 4096, "local_gb": 1024, "vcpus": 16}
    driver.spawn({"uuid": "u"})
    driver.destroy({"uuid": "u"})


def test_the_drivers_say_what_the_host_is_in_a_report_the_scheduler_takes(conf):
    from berth_contract.host_report import HostReport
    from compute_agent.resource_tracker import ResourceTracker

    conf.set_override("cpu_features", ["avx2", "sse2"], "fake")
    conf.set_override("hypervisor_version", 6001000, "fake")
    conf.set_override("host_ip", "192.0.2.20", "compute_agent")
    fake = drivers.load_driver(conf)
    report = ResourceTracker.from_conf(conf, "h", "h", fake).report()
    assert report["cpu_info"]["features"] == ["avx2", "sse2"] and report["cpu_info"]["arch"] == "x86_64"
    assert (report["hypervisor_version"], report["host_ip"]) == (6001000, "192.0.2.20")
    HostReport.from_wire(report, "h")
    conf.set_override("driver", "host", "compute_agent")
    host = drivers.load_driver(conf)
    facts = host.get_facts()
    assert facts["cpu_info"]["arch"] and facts["hypervisor_version"] > 0 and facts["host_ip"] == "192.0.2.20"
    HostReport.from_wire(ResourceTracker.from_conf(conf, "h", "h", host).report(), "h")


def test_fake_build_is_interrupted_by_stop(conf):
    conf.set_override("build_time", 600, "fake")
    driver = drivers.load_driver(conf)
    raised = []

    def build():
        try:
            driver.spawn({"uuid": "u"})
        except drivers.BuildAborted:
            raised.append(True)

    thread = threading.Thread(target=build)
    thread.start()
    driver.stop()
    thread.join(30)
    assert raised == [True]


def test_host_driver_reports_this_machine(conf):
    conf.set_override("driver", "host", "compute_agent")
    driver = drivers.load_driver(conf)
    assert driver.hypervisor_type == "host"
    totals = driver.get_totals()  # state_path does not exist yet: its parent is measured
    assert totals["memory_mb"] > 0
    assert totals["local_gb"] > 0
    assert totals["vcpus"] == (os.cpu_count() or 1) > 0
    driver.spawn({"uuid": "u"})
    driver.destroy({"uuid": "u"})


def test_unknown_driver(conf):
    with pytest.raises(ValueError, match="unknown driver"):
        drivers.load_driver(conf, "xen")


def test_store_round_trip(tmp_path):
    store = InstanceStore(str(tmp_path), "h1")
    assert store.load() == {}
    record = {"instance": {"uuid": "a"}, "state": "BUILDING"}
    record.update(request_spec={}, filter_properties={})
    store.put("a", record)
    store.put("b", dict(record, instance={"uuid": "b"}))
    assert store.set_state("a", "ACTIVE")
    assert store.delete("b")
    assert not store.delete("b")
    assert not store.set_state("zz", "ACTIVE")
    assert store.path == str(tmp_path / "compute" / "h1" / "instances.json")
    with open(store.path) as f:
        assert json.load(f) == {"a": dict(record, state="ACTIVE")}
    again = InstanceStore(str(tmp_path), "h1")
    assert again.load() == {"a": dict(record, state="ACTIVE")}
    assert sorted(os.listdir(tmp_path / "compute" / "h1")) == ["instances.json"]


def test_store_keeps_memory_when_write_fails(tmp_path, monkeypatch):
    store = InstanceStore(str(tmp_path), "h1")
    store.load()
    store.put("a", {"state": "BUILDING"})

    def fail():
        raise OSError("disk full")

    monkeypatch.setattr(store, "_write", fail)
    with pytest.raises(OSError):
        store.put("b", {"state": "BUILDING"})
    with pytest.raises(OSError):
        store.delete("a")
    assert "b" not in store
    assert store.get("a") == {"state": "BUILDING"}


def test_corrupt_store_refuses_to_load(tmp_path):
    store = InstanceStore(str(tmp_path), "h1")
    os.makedirs(os.path.dirname(store.path))
    with open(store.path, "w") as f:
        f.write("{not json")
    with pytest.raises(InstanceStoreError, match="instances.json"):
        store.load()
