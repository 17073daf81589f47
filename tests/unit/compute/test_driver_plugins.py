"""Drivers by entry point (berth.compute.drivers), each with its option group, and the fake
driver's options under their old names of [compute_agent] (deprecated, still taken)."""

import json
import shutil

import pytest

from compute_agent import conf as agent_conf
from compute_agent import driver as drivers
from compute_agent.driver import installed
from compute_agent.resource_tracker import ResourceTracker
from scheduler import conf as berth_conf
from tests.unit.policy.test_plugin_api import FIXTURE, pip_install, run


@pytest.fixture(scope="module")
def example_plugin(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("driver_plugin")
    source = shutil.copytree(FIXTURE, tmp / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return pip_install(source, tmp / "site")


def load_conf(tmp_path, text):
    path = tmp_path / "berth.conf"
    path.write_text(text)
    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="berth-test", default_config_files=[])
    return conf


def test_berths_drivers_are_entry_points_and_known_without_them(monkeypatch):
    assert installed.driver_class("fake") is drivers.FakeDriver
    assert installed.driver_class("host") is drivers.HostDriver
    # A source tree nobody installed has no entry points: Berth's own drivers are still there.
    monkeypatch.setattr(installed, "entry_points", lambda group: [])
    assert set(installed.available()) == {"fake", "host", "qemu"}


def test_an_unknown_driver_is_refused_naming_the_installed_ones(conf):
    with pytest.raises(ValueError) as info:
        drivers.load_driver(conf, "xen")
    assert str(info.value) == "[compute_agent] driver: unknown driver 'xen'; use one of fake, host, qemu"
    conf.set_override("driver", "xen", "compute_agent")
    with pytest.raises(ValueError, match="unknown driver 'xen'; use one of fake, host, qemu"):
        agent_conf.check_driver(conf)  # at start, before anything is taken


def test_the_fake_drivers_old_option_names_are_still_taken(tmp_path):
    conf = load_conf(tmp_path, "[compute_agent]\ndriver = fake\nfake_memory_mb = 4096\nfake_vcpus = 4\n"
                               "fake_cpu_arch = aarch64\nfake_hypervisor_type = qemu\n")
    assert (conf.fake.memory_mb, conf.fake.vcpus, conf.fake.local_gb) == (4096, 4, 1024)
    report = ResourceTracker.from_conf(conf, "h1", "h1", drivers.load_driver(conf)).report()
    assert (report["memory_mb"], report["vcpus"]) == (4096, 4)
    assert (report["cpu_arch"], report["hypervisor_type"]) == ("aarch64", "qemu")


def test_the_new_name_wins_over_the_old_one(tmp_path):
    conf = load_conf(tmp_path, "[compute_agent]\nfake_memory_mb = 4096\n[fake]\nmemory_mb = 8192\n")
    assert conf.fake.memory_mb == 8192


def test_the_sample_config_names_the_old_options_as_deprecated():
    from tests.unit.test_sample_config import ROOT

    fake = (ROOT / "etc/berth/berth.conf.sample").read_text().split("\n[fake]\n", 1)[1].split("\n[", 1)[0]
    assert "#memory_mb = 32768" in fake
    assert "# Deprecated group/name - [compute_agent]/fake_memory_mb" in fake


AGENT = """
    import json, sys
    from compute_agent import conf as agent_conf
    from compute_agent import driver as drivers
    from compute_agent.resource_tracker import ResourceTracker
    from scheduler import conf as berth_conf

    conf = berth_conf.new_conf()
    agent_conf.register_opts(conf)
    conf(["--config-file", sys.argv[1]], project="berth-test", default_config_files=[])
    driver = drivers.load_driver(conf)
    report = ResourceTracker.from_conf(conf, "h1", "h1", driver).report()
    try:
        drivers.load_driver(conf, "xen")
    except ValueError as exc:
        unknown = str(exc)
    print(json.dumps({"class": type(driver).__module__ + "." + type(driver).__name__,
                      "memory_mb": report["memory_mb"], "hypervisor_type": report["hypervisor_type"],
                      "unknown": unknown}))
"""


def test_a_driver_of_another_distribution_runs_by_its_entry_point_name_with_its_options(
        example_plugin, tmp_path):
    path = tmp_path / "agent.conf"
    path.write_text("[compute_agent]\ndriver = example\n[example_driver]\nmemory_mb = 3072\n")
    found = json.loads(run(example_plugin, AGENT, str(path)))
    assert found == {
        "class": "berth_example_plugin.driver.ExampleDriver", "memory_mb": 3072, "hypervisor_type": "example",
        "unknown": "[compute_agent] driver: unknown driver 'xen'; use one of example, fake, host, qemu",
    }


def test_the_config_generator_lists_an_installed_drivers_options(example_plugin):
    sample = run(example_plugin, "import sys; from oslo_config.generator import main; sys.exit(main())",
                 "--namespace", "berth.compute_agent")
    assert "#memory_mb = 2048" in sample.split("[example_driver]", 1)[1]
    assert "[fake]" in sample and "[compute_agent]" in sample


def test_a_driver_that_cannot_be_used_is_refused_saying_why(monkeypatch):
    from importlib.metadata import EntryPoint

    eps = [EntryPoint("broken", "a_module_nobody_installed:Driver", installed.GROUP),
           EntryPoint("odd", "json:JSONDecoder", installed.GROUP)]
    monkeypatch.setattr(installed, "entry_points", lambda group: eps)
    with pytest.raises(ValueError, match=r"^\[compute_agent\] driver: driver broken: entry point 'broken "
                       r"= a_module_nobody_installed:Driver' \(berth.compute.drivers\) cannot be used: it "
                       r"fails to import: ModuleNotFoundError"):
        installed.driver_class("broken")
    with pytest.raises(ValueError, match="is not a subclass of compute_agent.driver.base.ComputeDriver"):
        installed.driver_class("odd")
    # Listing the options leaves them out: a broken driver nobody chose stops no one.
    assert [m.__name__ for m in installed.option_modules()] == ["compute_agent.driver.fake",
                                                                "compute_agent.driver.qemu.driver"]


def test_two_drivers_of_one_name_are_refused_naming_both(monkeypatch):
    from importlib.metadata import EntryPoint

    eps = [EntryPoint("fake", "elsewhere:FakeDriver", installed.GROUP)]
    monkeypatch.setattr(installed, "entry_points", lambda group: eps)
    with pytest.raises(ValueError, match="two drivers are named fake: entry point 'fake = "
                       "compute_agent.driver.fake:FakeDriver'"):
        installed.driver_class("host")

