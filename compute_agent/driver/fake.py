"""A simulated host of configurable size ([compute_agent] fake_*)."""

import random

from compute_agent import load_model
from compute_agent.driver import base, cpu_traits, host_facts
from compute_agent.fake_load import LoadOverrides
from compute_agent.resource_tracker import normalize_flavor


class MoveFailed(base.MoveFailed):
    """A fake move drawn to fail (fake_move_failure_rate)."""


class FakeDriver(base.ComputeDriver):
    name = "fake"
    hypervisor_type = "fake"

    def __init__(self, conf):
        super().__init__(conf)
        #: The load set at run time (set_fake_load), over the busy/idle model of the options.
        self.fake_load = LoadOverrides()

    def describe(self):
        totals = self.get_totals()
        return (f"driver fake: simulated host of {totals['memory_mb']} MB memory, {totals['local_gb']} GB "
                f"disk, {totals['vcpus']} vCPUs ([compute_agent] fake_memory_mb, fake_local_gb, fake_vcpus)")

    def get_totals(self):
        opts = self.conf.compute_agent
        return {
            "memory_mb": opts.fake_memory_mb,
            "local_gb": opts.fake_local_gb,
            "vcpus": opts.fake_vcpus,
        }

    def get_facts(self):
        opts = self.conf.compute_agent
        return {
            "cpu_info": host_facts.fake_cpu_info(opts.fake_cpu_arch, opts.fake_cpu_features, opts.fake_vcpus),
            "hypervisor_version": opts.fake_hypervisor_version,
            "host_ip": host_facts.host_ip(opts.host_ip),
        }

    def get_traits(self):
        opts = self.conf.compute_agent
        return cpu_traits.of_flags(opts.fake_cpu_arch, opts.fake_cpu_features)

    def spawn(self, instance):
        self._wait(self.conf.compute_agent.fake_build_time)

    def destroy(self, instance):
        self.fake_load.forget(instance.get("uuid"))

    def migrate_in(self, instance, migration):
        self._move(instance, migration)

    def resize(self, instance, migration):
        self._move(instance, migration)

    def _move(self, instance, migration):
        """Take fake_migration_time_per_gb per GiB of the instance's memory, then fail if this
        move is among the fake_move_failure_rate drawn to (the same draw when it is resumed)."""
        opts = self.conf.compute_agent
        memory_gb = normalize_flavor(instance.get("flavor"))["memory_mb"] / 1024
        self._wait(opts.fake_migration_time_per_gb * memory_gb)
        draw = random.Random(f"{opts.fake_load_seed}:{instance.get('uuid')}:{migration.get('id')}").random()
        if draw < opts.fake_move_failure_rate:
            raise MoveFailed(f"the fake driver failed the {migration.get('kind', 'move')} "
                             f"([compute_agent] fake_move_failure_rate = {opts.fake_move_failure_rate:g})")

    def measure(self, instances, now=None):
        """Measured load and reservation figures of ``instances`` (compute_agent.load_model),
        each instance's use included (``instance_usage``)."""
        opts = self.conf.compute_agent
        return load_model.simulated_load(
            instances, opts.fake_vcpus, opts.fake_memory_mb,
            reserved_cpus=opts.reserved_host_cpus, reserved_memory_mb=opts.reserved_host_memory_mb,
            busy_fraction=opts.fake_busy_fraction, busy_cpu_load=opts.fake_busy_cpu_load,
            idle_cpu_load=opts.fake_idle_cpu_load, hidden_cpu_load=opts.fake_hidden_cpu_load,
            idle_memory_fraction=opts.fake_idle_memory_fraction,
            reservation_fraction=opts.fake_reservation_fraction,
            powered_off_fraction=opts.fake_powered_off_fraction, seed=opts.fake_load_seed, now=now,
            overrides=self.fake_load.for_instances(instances),
        )
