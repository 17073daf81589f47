"""A simulated host of configurable size, and its options: the ``[fake]`` group (once
``[compute_agent] fake_*``, names still taken, deprecated)."""

import os
import random
import threading

from oslo_config import cfg

from compute_agent import load_model
from compute_agent.driver import base, cpu_traits, host_facts
from compute_agent.driver.capabilities import Capabilities
from compute_agent.fake_load import LoadOverrides
from compute_agent.resource_tracker import normalize_flavor
from scheduler.conf import groups

group = cfg.OptGroup(
    "fake",
    title="Fake driver",
    help="The fake driver ([compute_agent] driver = fake): the simulated host it reports, its builds, "
    "moves and load. Each option was [compute_agent] fake_<name> before, a name still taken (deprecated).",
)


def _old(name):
    return [cfg.DeprecatedOpt(f"fake_{name}", group="compute_agent")]


opts = [
    cfg.IntOpt(
        "memory_mb",
        deprecated_opts=_old("memory_mb"),
        default=32768,
        min=1,
        help="Total memory (MiB) the fake driver reports.",
    ),
    cfg.IntOpt(
        "local_gb",
        deprecated_opts=_old("local_gb"),
        default=1024,
        min=1,
        help="Total local disk (GiB) the fake driver reports.",
    ),
    cfg.IntOpt(
        "vcpus",
        deprecated_opts=_old("vcpus"),
        default=16,
        min=1,
        help="Virtual CPUs the fake driver reports.",
    ),
    cfg.FloatOpt(
        "build_time",
        deprecated_opts=_old("build_time"),
        default=0.0,
        min=0.0,
        help="Seconds a fake build takes before the instance goes ACTIVE.",
    ),
    cfg.FloatOpt(
        "migration_time_per_gb",
        deprecated_opts=_old("migration_time_per_gb"),
        default=0.0,
        min=0.0,
        help="Seconds the fake driver takes to move in, or resize, an instance, per GiB of "
        "its flavor's memory (a live migration copies its memory; the others take as long).",
    ),
    cfg.FloatOpt(
        "move_prepare_time",
        default=0.0,
        min=0.0,
        help="Seconds the destination of a move between two agents takes to prepare (its first "
        "step, before the source migrates the instance out).",
    ),
    cfg.FloatOpt(
        "move_finish_time",
        default=0.0,
        min=0.0,
        help="Seconds the destination of a move between two agents takes to finish (its last "
        "step, once the source has migrated the instance out).",
    ),
    cfg.FloatOpt(
        "power_time",
        default=0.0,
        min=0.0,
        help="Seconds a fake power off, power on or reboot (soft or hard) takes before its instance is "
        "SHUTOFF or ACTIVE again (berth server stop, start, reboot).",
    ),
    cfg.StrOpt(
        "move_failure_step",
        default="migrate",
        choices=[("prepare", "the destination's preparing fails"),
                 ("migrate", "the source's migrating out fails"),
                 ("finish", "the destination's finishing fails")],
        help="The step of a move between two agents at which the moves drawn to fail "
        "(move_failure_rate) fail. A move taken in by its destination alone (compute API 1.x) and "
        "a resize in place fail at their one step.",
    ),
    cfg.FloatOpt(
        "move_failure_rate",
        deprecated_opts=_old("move_failure_rate"),
        default=0.0,
        min=0.0,
        max=1.0,
        help="Share of the fake driver's moves (migrations, evacuations, resizes) that fail "
        "once their time is up: 0 none, 1 every one. Drawn per move from load_seed, the "
        "instance and the migration id, so a resumed move ends as it would have.",
    ),
    cfg.FloatOpt(
        "busy_fraction",
        deprecated_opts=_old("busy_fraction"),
        default=0.0,
        min=0.0,
        max=1.0,
        help="Share of the fake driver's instances that are busy (drawn per instance from "
        "load_seed and its uuid); the others idle. Shapes the measured load it reports.",
    ),
    cfg.FloatOpt(
        "busy_cpu_load",
        deprecated_opts=_old("busy_cpu_load"),
        default=1.0,
        min=0.0,
        help="Cores a busy fake instance keeps busy, per vCPU of its flavor.",
    ),
    cfg.FloatOpt(
        "idle_cpu_load",
        deprecated_opts=_old("idle_cpu_load"),
        default=0.05,
        min=0.0,
        help="Cores an idle fake instance keeps busy, per vCPU of its flavor.",
    ),
    cfg.FloatOpt(
        "hidden_cpu_load",
        deprecated_opts=_old("hidden_cpu_load"),
        default=0.0,
        min=0.0,
        help="Cores the fake host keeps busy with load no allocation accounts for (guests "
        "beyond their flavor, work outside any instance).",
    ),
    cfg.FloatOpt(
        "idle_memory_fraction",
        deprecated_opts=_old("idle_memory_fraction"),
        default=0.5,
        min=0.0,
        max=1.0,
        help="Share of its memory an idle fake instance uses (a busy one uses all of it).",
    ),
    cfg.FloatOpt(
        "reservation_fraction",
        deprecated_opts=_old("reservation_fraction"),
        default=1.0,
        min=0.0,
        max=1.0,
        help="Share of its flavor a fake instance reserves; it may burst into the rest "
        "(the cpu/memory reserved and burst figures it reports).",
    ),
    cfg.FloatOpt(
        "powered_off_fraction",
        deprecated_opts=_old("powered_off_fraction"),
        default=0.0,
        min=0.0,
        max=1.0,
        help="Share of the fake driver's instances that are powered off: they use nothing "
        "and their reservation is reported as undeployed.",
    ),
    cfg.IntOpt(
        "load_seed",
        deprecated_opts=_old("load_seed"),
        default=0,
        help="Seed of the fake driver's load: which instances are busy or powered off.",
    ),
    cfg.StrOpt(
        "cpu_arch",
        deprecated_opts=_old("cpu_arch"),
        default="x86_64",
        help="CPU architecture the fake driver reports (ImagePropertiesFilter's hw_architecture).",
    ),
    cfg.ListOpt(
        "cpu_features",
        deprecated_opts=_old("cpu_features"),
        default=["sse", "sse2", "sse4_2", "aes", "avx", "avx2"],
        help="CPU features the fake driver reports in cpu_info (what a flavor's "
        "'capabilities:cpu_info:features' extra spec matches), and as traits where os-traits "
        "names them (avx2: HW_CPU_X86_AVX2) when cpu_arch is x86.",
    ),
    cfg.IntOpt(
        "hypervisor_version",
        deprecated_opts=_old("hypervisor_version"),
        default=1000,
        min=0,
        help="Hypervisor version the fake driver reports, as Nova counts it (1.2.3 is 1002003).",
    ),
    cfg.StrOpt(
        "hypervisor_type",
        deprecated_opts=_old("hypervisor_type"),
        default="fake",
        help="Hypervisor type the fake driver reports (ImagePropertiesFilter's img_hv_type).",
    ),
    cfg.ListOpt(
        "vm_modes",
        deprecated_opts=_old("vm_modes"),
        default=["hvm"],
        help="VM modes the fake driver reports (ImagePropertiesFilter's hw_vm_mode).",
    ),
]


def list_opts():
    return [(group, opts)]


def register_opts(conf):
    groups.register(conf, group, opts)


class MoveFailed(base.MoveFailed):
    """A fake move drawn to fail ([fake] move_failure_rate)."""


class FakeDriver(base.ComputeDriver):
    name = "fake"
    hypervisor_type = "fake"
    capabilities = Capabilities(live_migration=True, resize_in_place=True, measures_usage=True,
                                power_control=True)
    #: The prefix of each line the fake console says (berth console log show shows them).
    CONSOLE = "berth fake console:"

    def __init__(self, conf):
        super().__init__(conf)
        #: The load set at run time (set_fake_load), over the busy/idle model of the options.
        self.fake_load = LoadOverrides()
        #: The instances powered off: they use nothing (measure leaves them out).
        self._off = set()
        self._console_lock = threading.Lock()

    # -- the console: a file per instance under state_path, kept across the agent's restarts --

    def _console_path(self, uuid):
        return os.path.join(self.conf.state_path, "fake-consoles", f"{uuid}.log")

    def _say(self, instance, what):
        """Append ``<CONSOLE> <uuid> <what>`` to the instance's console."""
        uuid = instance.get("uuid")
        path = self._console_path(uuid)
        with self._console_lock:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as console:
                console.write(f"{self.CONSOLE} {uuid} {what}\n")

    def console_output(self, instance, lines=None):
        try:
            path = self._console_path(instance.get("uuid"))
            with self._console_lock, open(path, encoding="utf-8") as console:
                said = console.read().splitlines()
        except FileNotFoundError:
            said = []
        return said if lines is None else said[-lines:] if lines > 0 else []

    # -- power --

    def power_off(self, instance):
        self._wait(self.conf.fake.power_time)
        self._off.add(instance.get("uuid"))
        self._say(instance, "powered off")

    def power_on(self, instance):
        self._wait(self.conf.fake.power_time)
        self._off.discard(instance.get("uuid"))
        self._say(instance, "powered on")
        self._say(instance, "booted")

    def reboot(self, instance, hard=False):
        self._wait(self.conf.fake.power_time)
        self._off.discard(instance.get("uuid"))
        self._say(instance, "rebooted (hard)" if hard else "rebooted")
        self._say(instance, "booted")

    def restore_power_state(self, instance, powered_on):
        (self._off.discard if powered_on else self._off.add)(instance.get("uuid"))

    def describe(self):
        totals = self.get_totals()
        return (f"driver fake: simulated host of {totals['memory_mb']} MB memory, {totals['local_gb']} GB "
                f"disk, {totals['vcpus']} vCPUs ([compute_agent] fake_memory_mb, fake_local_gb, fake_vcpus)")

    def get_totals(self):
        opts = self.conf.fake
        return {
            "memory_mb": opts.memory_mb,
            "local_gb": opts.local_gb,
            "vcpus": opts.vcpus,
        }

    def get_facts(self):
        """The simulated host's, from the [fake] options."""
        opts = self.conf.fake
        return {
            "hypervisor_type": opts.hypervisor_type,
            "cpu_arch": opts.cpu_arch,
            "vm_modes": list(opts.vm_modes),
            "cpu_info": host_facts.fake_cpu_info(opts.cpu_arch, opts.cpu_features, opts.vcpus),
            "hypervisor_version": opts.hypervisor_version,
            "host_ip": host_facts.host_ip(self.conf.compute_agent.host_ip),
        }

    def get_traits(self):
        opts = self.conf.fake
        return cpu_traits.of_flags(opts.cpu_arch, opts.cpu_features)

    def spawn(self, instance):
        self._wait(self.conf.fake.build_time)
        self._say(instance, "booted")

    def destroy(self, instance):
        uuid = instance.get("uuid")
        self.fake_load.forget(uuid)
        self._off.discard(uuid)
        with self._console_lock:
            try:
                os.remove(self._console_path(uuid))
            except FileNotFoundError:
                pass

    def migrate_in(self, instance, migration):
        self._move(instance, migration)

    def resize(self, instance, migration):
        self._move(instance, migration)

    def prepare_move_in(self, instance, migration):
        self._step(instance, migration, "prepare", self.conf.fake.move_prepare_time)
        return {"uri": f"fake://{self.conf.host}/{migration.get('id')}"}

    def migrate_out(self, instance, migration, transfer):
        self._step(instance, migration, "migrate", self._copy_time(instance))

    def finish_move_in(self, instance, migration, transfer):
        self._step(instance, migration, "finish", self.conf.fake.move_finish_time)

    def _copy_time(self, instance):
        """migration_time_per_gb per GiB of the instance's memory."""
        memory_gb = normalize_flavor(instance.get("flavor"))["memory_mb"] / 1024
        return self.conf.fake.migration_time_per_gb * memory_gb

    def _move(self, instance, migration):
        """A move taken in alone, or a resize in place: its one step."""
        self._wait(self._copy_time(instance))
        self._fail_if_drawn(instance, migration)

    def _step(self, instance, migration, step, seconds):
        self._wait(seconds)
        if step == self.conf.fake.move_failure_step:
            self._fail_if_drawn(instance, migration)

    def _fail_if_drawn(self, instance, migration):
        """Fail if this move is among the move_failure_rate drawn to (the same draw when it is
        resumed)."""
        opts = self.conf.fake
        draw = random.Random(f"{opts.load_seed}:{instance.get('uuid')}:{migration.get('id')}").random()
        if draw < opts.move_failure_rate:
            raise MoveFailed(f"the fake driver failed the {migration.get('kind', 'move')} "
                             f"([fake] move_failure_rate = {opts.move_failure_rate:g})")

    def measure(self, instances, now=None):
        """Measured load and reservation figures of ``instances`` (compute_agent.load_model),
        each instance's use included (``instance_usage``)."""
        opts, agent = self.conf.fake, self.conf.compute_agent
        if self._off:  # powered off: no load, no sample (a scaling group's member is not ready)
            instances = {uuid: flavor for uuid, flavor in instances.items() if uuid not in self._off}
        return load_model.simulated_load(
            instances, opts.vcpus, opts.memory_mb,
            reserved_cpus=agent.reserved_host_cpus, reserved_memory_mb=agent.reserved_host_memory_mb,
            busy_fraction=opts.busy_fraction, busy_cpu_load=opts.busy_cpu_load,
            idle_cpu_load=opts.idle_cpu_load, hidden_cpu_load=opts.hidden_cpu_load,
            idle_memory_fraction=opts.idle_memory_fraction,
            reservation_fraction=opts.reservation_fraction,
            powered_off_fraction=opts.powered_off_fraction, seed=opts.load_seed, now=now,
            overrides=self.fake_load.for_instances(instances),
        )
