"""This machine's real totals; the instances themselves are simulated."""

import os

import psutil

from compute_agent.driver import base, cpu_traits, host_facts
from compute_agent.driver.capabilities import Capabilities

MIB = 1024 * 1024
GIB = 1024 * MIB



class HostDriver(base.ComputeDriver):
    name = "host"
    hypervisor_type = "host"
    # Its instances are simulated: any move is done at once. It measures nothing.
    capabilities = Capabilities(live_migration=True, resize_in_place=True)

    def describe(self):
        totals, disk = self.get_totals(), host_facts.existing_ancestor(self.conf.state_path)
        return (f"driver host: this machine's {totals['memory_mb']} MB memory, {totals['local_gb']} GB disk "
                f"(the file system of {disk}), {totals['vcpus']} vCPUs")

    def get_totals(self):
        fs = os.statvfs(host_facts.existing_ancestor(self.conf.state_path))
        return {
            "memory_mb": psutil.virtual_memory().total // MIB,
            "local_gb": fs.f_blocks * fs.f_frsize // GIB,
            "vcpus": os.cpu_count() or 1,
        }

    def get_facts(self):
        """Read from the machine: its architecture, /proc/cpuinfo, the kernel's version, the outward
        address. Its instances being simulated, they run in any VM mode: hvm, as Nova's default."""
        return {
            "hypervisor_type": self.hypervisor_type,
            "cpu_arch": host_facts.machine_arch(),
            "vm_modes": ["hvm"],
            "cpu_info": host_facts.cpu_info(),
            "hypervisor_version": host_facts.kernel_version(),
            "host_ip": host_facts.host_ip(self.conf.compute_agent.host_ip),
        }

    def get_traits(self):
        """The traits of /proc/cpuinfo's flags."""
        info = host_facts.cpu_info()
        return cpu_traits.of_flags(info["arch"], info["features"])

    def spawn(self, instance):
        self._wait(0)

    def destroy(self, instance):
        pass

    def migrate_in(self, instance, migration):
        self._wait(0)

    def resize(self, instance, migration):
        self._wait(0)
