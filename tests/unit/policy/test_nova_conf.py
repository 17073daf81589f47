"""A nova.conf's scheduler options, read as Nova means them."""

import subprocess
import sys

import pytest

from scheduler import conf as berth_conf
from scheduler.conf import opts
from scheduler.policy import filters, weighers

NOVA_FILTERS = ["ComputeFilter",
                "nova.scheduler.filters.compute_capabilities_filter.ComputeCapabilitiesFilter",
                "ImagePropertiesFilter", "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"]
NOVA_CONF = f"""\
[DEFAULT]
cpu_allocation_ratio = 4.0
ram_allocation_ratio = 1.0
disk_allocation_ratio = 2.0
service_down_time = 120

[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
enabled_filters = {",".join(NOVA_FILTERS)}
weight_classes = nova.scheduler.weights.all_weighers
ram_weight_multiplier = 2.0
host_subset_size = 3
"""


def load(tmp_path, text, extra=""):
    path = tmp_path / "nova.conf"
    path.write_text(text + extra)
    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    conf(["--config-file", str(path)], project="berth-test", default_config_files=[])
    return conf


def test_a_nova_conf_places_with_novas_plugins_ratios_and_timings(tmp_path):
    conf = load(tmp_path, NOVA_CONF)
    assert [f.name for f in filters.enabled_filters(conf)] == [
        "ComputeFilter", "ComputeCapabilitiesFilter", "ImagePropertiesFilter",
        "ServerGroupAntiAffinityFilter", "ServerGroupAffinityFilter"]
    assert [w.name for w in weighers.enabled_weighers(conf)] == [
        "RAMWeigher", "DiskWeigher", "CPUWeigher", "IoOpsWeigher", "MetricsWeigher",
        "ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher", "BuildFailureWeigher",
        "HypervisorVersionWeigher", "NumInstancesWeigher", "ImagePropertiesWeigher"]
    fs = conf.filter_scheduler
    assert (fs.cpu_allocation_ratio, fs.ram_allocation_ratio, fs.disk_allocation_ratio) == (4.0, 1.0, 2.0)
    assert (fs.ram_weight_multiplier, fs.host_subset_size) == (2.0, 3)
    assert conf.scheduler.service_down_time == 120


def test_berths_own_names_win_over_novas_where_both_are_given(tmp_path):
    conf = load(tmp_path, NOVA_CONF, "weighers = RAMWeigher\ncpu_allocation_ratio = 8.0\n")
    assert [w.name for w in weighers.enabled_weighers(conf)] == ["RAMWeigher"]
    assert conf.filter_scheduler.cpu_allocation_ratio == 8.0


@pytest.mark.parametrize(("line", "message"), [
    ("enabled_filters = ComputeFilter,NUMATopologyFilter",
     "[filter_scheduler] enabled_filters: filter NUMATopologyFilter: Berth has no NUMA topology: "
     "leave it out"),
    ("enabled_filters = nova.scheduler.filters.pci_passthrough_filter.PciPassthroughFilter",
     "filter nova.scheduler.filters.pci_passthrough_filter.PciPassthroughFilter: Berth has no PCI devices"),
    ("weight_classes = nova.scheduler.weights.pci.PCIWeigher",
     "[filter_scheduler] weighers: weigher nova.scheduler.weights.pci.PCIWeigher: Berth has no PCI devices"),
    ("enabled_filters = ComputeFilter,NoSuchFilter", "unknown filter 'NoSuchFilter'"),
    ("available_filters = nova.scheduler.filters.ram_filter.RamFilter\nenabled_filters = CoreFilter",
     "[filter_scheduler] enabled_filters: unknown filter 'CoreFilter'; installed: RamFilter"),
])
def test_a_nova_plugin_berth_does_not_have_is_named_with_what_to_do(tmp_path, line, message):
    conf = load(tmp_path, "[filter_scheduler]\n" + line + "\n")
    with pytest.raises(ValueError) as raised:
        filters.enabled_filters(conf)
        weighers.enabled_weighers(conf)
    assert message in str(raised.value)


def test_a_scheduler_given_a_nova_plugin_it_lacks_stops_at_start_with_one_line(tmp_path):
    path = tmp_path / "berth.conf"
    path.write_text(f"[DEFAULT]\nstate_path = {tmp_path}\ntransport_url = memory://\n"
                    "[filter_scheduler]\nenabled_filters = ComputeFilter,NUMATopologyFilter\n")
    done = subprocess.run([sys.executable, "-m", "scheduler.cmd.scheduler", "--config-file", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "NUMATopologyFilter" in line]
    assert len(lines) == 1 and "Berth has no NUMA topology: leave it out" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
