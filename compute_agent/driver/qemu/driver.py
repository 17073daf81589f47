"""The qemu driver and its options, the ``[qemu]`` group: each instance a qemu process of its
own, detached from the agent, booted from its image (a qcow2 overlay of the image's disk, or a
kernel and initramfs booted directly) and driven over QMP."""

import fcntl
import glob
import logging
import os
import re
import shutil
import subprocess
import threading
import time

import psutil
from oslo_config import cfg

from berth_contract.resource_classes import DISK_GB
from compute_agent.driver import base, cpu_traits, host_facts
from compute_agent.driver.capabilities import Capabilities
from compute_agent.driver.qemu import accel, cold_migration, images, nbd, processes, qemu_img, qmp, usage
from compute_agent.driver.qemu.cold_migration import ColdMigration
from compute_agent.driver.qemu.command import qemu_command
from compute_agent.driver.qemu.guest_files import GuestFiles
from compute_agent.driver.qemu.live_migration import LiveMigration
from compute_agent.resource_tracker import flavor_amounts, normalize_flavor
from scheduler.conf import groups

LOG = logging.getLogger(__name__)

MIB = 1024 * 1024
GIB = 1024 * MIB
#: What a Linux guest's console says when its kernel panics.
PANIC = "Kernel panic - not syncing"
#: What qemu says of a guest that powered itself off (its qemu waits: -action shutdown=pause).
SHUT_DOWN = "shutdown"
#: What qemu says of a guest that will not run again.
ENDED = ("guest-panicked", "internal-error", "io-error")

group = cfg.OptGroup(
    "qemu",
    title="QEMU driver",
    help="The qemu driver ([compute_agent] driver = qemu): real guests, one qemu process each.",
)

opts = [
    cfg.StrOpt("binary", default="qemu-system-x86_64",
               help="The qemu system emulator to run, by name (looked up in PATH) or path."),
    cfg.StrOpt("accel", default="auto",
               choices=[("kvm", "KVM: the host's hardware virtualization"),
                        ("tcg", "TCG: qemu's emulation, slower, runs anywhere"),
                        ("auto", "KVM when a probe guest runs under it, else TCG")],
               help="The accelerator guests run on; the agent says at start which one and why."),
    cfg.StrOpt("cpu_model",
               help="The CPU model guests see (qemu's -cpu: a model of qemu-system-x86_64 -cpu help, "
               "host, or max). Unset: host under KVM (the host's own CPU: fastest, but a guest then "
               "live-migrates only to hosts of the same CPU), qemu's default under TCG. Set a named model "
               "every host has, the same on all, to live-migrate between CPUs of different generations."),
    cfg.FloatOpt("kvm_probe_timeout", default=5.0, min=0.5,
                 help="Seconds accel = auto waits for a probe guest under KVM to say something before "
                 "it takes KVM for not working (a /dev/kvm that hangs its guests) and runs TCG."),
    cfg.StrOpt("images_path", default="$state_path/images",
               help="The image directory: an image is <name>.json (kernel_id, ramdisk_id, os_command_line, "
               "disk, disk_format, console_ready: see tools/build-guest-image) or a disk <name>.qcow2 "
               "or <name>.raw. A build names its image with berth server create --image."),
    cfg.StrOpt("default_image",
               help="The image of a build that names none. Unset: such a build fails."),
    cfg.StrOpt("instances_path", default="$state_path/instances",
               help="Where each instance's files are, in a directory named by its UUID: its disk "
               "overlay, serial console log, QMP socket and pid file. Each agent needs its own: a move "
               "between two agents has the instance in both."),
    cfg.PortOpt("migration_port_min", default=49152,
                help="Lowest TCP port of the range moves into this host listen on (on the address the "
                "agent reports, [compute_agent] host_ip): a live migration's qemu, a cold move's "
                "qemu-nbd serving the instance's new disk."),
    cfg.PortOpt("migration_port_max", default=49215,
                help="Highest TCP port of the range moves into this host listen on."),
    cfg.IntOpt("live_migration_bandwidth", default=0, min=0,
               help="MiB/s a live migration out of this host may send at most (as Nova's [libvirt] "
               "live_migration_bandwidth); 0: as fast as the network goes (qemu's own default is 32)."),
    cfg.IntOpt("memory_mb", min=1,
               help="Total memory (MiB) the host reports. Unset: this machine's."),
    cfg.IntOpt("local_gb", min=1,
               help="Total local disk (GiB) the host reports. Unset: the file system of instances_path."),
    cfg.IntOpt("vcpus", min=1,
               help="Virtual CPUs the host reports. Unset: this machine's CPU count."),
    cfg.FloatOpt("boot_timeout", default=120.0, min=1.0,
                 help="Seconds a build waits for its guest to run (and to print its image's "
                 "console_ready line, when the image has one) before it fails."),
    cfg.FloatOpt("stop_timeout", default=10.0, min=0.0,
                 help="Seconds a delete waits for qemu to quit when told over QMP before it kills it."),
]


def list_opts():
    return [(group, opts)]


def register_opts(conf):
    groups.register(conf, group, opts)



def _check_local_disk(instance):
    """GuestFailed when the flavor asks its root disk of a volume (``resources:DISK_GB=0``, as Nova
    writes boot-from-volume flavors): this driver has no volumes, and the disk it would make on
    the host's own disk is one that neither the scheduler nor this agent counts."""
    flavor = instance.get("flavor")
    root_gb = normalize_flavor(flavor)["root_gb"]
    if root_gb and not flavor_amounts(flavor).get(DISK_GB, 0):
        raise GuestFailed(f"the qemu driver has no volumes: the flavor asks its {root_gb} GB root disk of "
                          "a volume (resources:DISK_GB=0), and a disk on this host's own disk would be "
                          "counted nowhere; give the flavor local disk, or boot it where a driver has "
                          "volumes")

class GuestFailed(base.BuildFailed):
    """A build that failed for the reason its message says: the agent reschedules it."""


class QemuDriver(LiveMigration, ColdMigration, base.ComputeDriver):
    name = "qemu"
    hypervisor_type = "QEMU"
    # Builds, deletes, moves to another host (live or cold: compute_agent.driver.qemu.cold_migration),
    # measured use and power; a resize goes to another host (not in place).
    capabilities = Capabilities(live_migration=True, measures_usage=True, power_control=True)

    def __init__(self, conf, instances_path=None):
        """``instances_path``: this agent's, instead of [qemu] instances_path (berth-all-in-one
        gives each of its agents one of its own)."""
        super().__init__(conf)
        options = conf.qemu
        self.instances_path = instances_path or options.instances_path
        if options.migration_port_min > options.migration_port_max:
            raise ValueError(f"[qemu] migration_port_min {options.migration_port_min} is above "
                             f"migration_port_max {options.migration_port_max}")
        if shutil.which(options.binary) is None:
            raise base.CannotStart(f"[qemu] binary {options.binary} is not installed (Debian: "
                                   "qemu-system-x86), or not executable")
        self._accel_lock = threading.Lock()
        self._accel = None
        self._version = None
        self._meter = usage.UsageMeter()

    # -- the host ------------------------------------------------------------------

    @property
    def _options(self):
        return self.conf.qemu

    def accelerator(self):
        """kvm or tcg, chosen once (accel = auto probes KVM) and said in one line of the log."""
        with self._accel_lock:
            if self._accel is None:
                chosen, why = accel.choose(self._options.accel, self._options.binary,
                                           self._options.kvm_probe_timeout)
                if chosen == "tcg" and self._options.cpu_model == "host":
                    raise base.CannotStart(f"[qemu] cpu_model = host needs KVM, and guests run under TCG "
                                           f"here ({why}): set another cpu_model, or none")
                LOG.info("Guests run under %s (%s)", chosen.upper(), why)
                self._accel = chosen
            return self._accel

    def cpu_model(self):
        """qemu's -cpu of the guests here: [qemu] cpu_model, else host under KVM, else qemu's default
        (None)."""
        if self._options.cpu_model:
            return self._options.cpu_model
        return "host" if self.accelerator() == "kvm" else None

    def qemu_version(self):
        """What ``binary --version`` says, e.g. 7.2.22; None when it cannot be run."""
        if self._version is None:
            try:
                said = subprocess.run([self._options.binary, "--version"], capture_output=True, text=True,
                                      timeout=30, check=True).stdout
            except (OSError, subprocess.SubprocessError) as exc:
                LOG.warning("Cannot read the version of %s: %s", self._options.binary, exc)
                return None
            found = re.search(r"version (\d+\.\d+(?:\.\d+)?)", said)
            self._version = found.group(1) if found else ""
        return self._version or None

    def describe(self):
        totals = self.get_totals()
        cpu = f" (CPU {self.cpu_model()})" if self.cpu_model() else ""
        return (f"driver qemu: {self._options.binary} {self.qemu_version() or '(version unknown)'} under "
                f"{self.accelerator()}{cpu}, images in {self._options.images_path}, instances in "
                f"{self.instances_path}; {totals['memory_mb']} MB memory, {totals['local_gb']} GB "
                f"disk, {totals['vcpus']} vCPUs")

    def get_totals(self):
        options = self._options
        local_gb = options.local_gb
        if local_gb is None:
            fs = os.statvfs(host_facts.existing_ancestor(self.instances_path))
            local_gb = fs.f_blocks * fs.f_frsize // GIB
        return {
            "memory_mb": options.memory_mb or psutil.virtual_memory().total // MIB,
            "local_gb": local_gb,
            "vcpus": options.vcpus or os.cpu_count() or 1,
        }

    def get_facts(self):
        facts = {
            "hypervisor_type": self.hypervisor_type,
            "cpu_arch": host_facts.machine_arch(),
            "vm_modes": ["hvm"],
            "cpu_info": host_facts.cpu_info(),
            "host_ip": host_facts.host_ip(self.conf.compute_agent.host_ip),
        }
        version = self.qemu_version()
        if version:
            facts["hypervisor_version"] = host_facts.version_to_int(version)
        return facts

    def get_traits(self):
        info = host_facts.cpu_info()
        return cpu_traits.of_flags(info["arch"], info["features"])

    def measure(self, instances, now=None):
        """What the guests of ``instances`` ({uuid: flavor}) use and the host's load, measured
        (compute_agent.driver.qemu.usage): the reports' ``load`` and ``instance_usage``."""
        used = {}
        for uuid, flavor in instances.items():
            pid = self._files(uuid).read_pid()
            if processes.runs(pid, uuid):
                sample = self._meter.guest(uuid, pid, normalize_flavor(flavor)["memory_mb"])
                if sample is not None:
                    used[uuid] = sample
        self._meter.forget_others(used)
        agent = self.conf.compute_agent
        load = usage.host_load(self._meter, instances, self.get_totals()["memory_mb"],
                               agent.reserved_host_cpus, agent.reserved_host_memory_mb, now)
        return {"load": load, "instance_usage": used}

    # -- instances -----------------------------------------------------------------

    def _files(self, uuid):
        return GuestFiles.of(self.instances_path, uuid)

    def image_of(self, instance):
        """The image ``instance`` boots (its request's image id, else [qemu] default_image)."""
        name = (instance.get("image") or {}).get("id") or self._options.default_image
        if not name:
            raise images.ImageError("the build names no image (berth server create --image NAME) and [qemu] "
                                    "default_image is not set")
        return images.find(self._options.images_path, name)

    def spawn(self, instance):
        """Start the instance's qemu and wait until its guest runs. A build resumed after a restart
        of the agent finds its qemu running already and waits for it alone. Raises GuestFailed (or
        ImageError) with the reason, having removed whatever it made."""
        uuid = instance["uuid"]
        files = self._files(uuid)
        _check_local_disk(instance)
        image = self.image_of(instance)
        try:
            if not processes.runs(files.read_pid(), uuid):
                self._launch(instance, image, files)
            self._wait_until_up(files, uuid, image)
        except base.BuildAborted:
            raise  # the guest runs on: the build resumes when the agent starts again
        except BaseException:
            self._kill(files, uuid)
            self._remove(files)
            raise

    def _launch(self, instance, image, files, extra=()):
        """Make the instance's directory anew and start its qemu (``extra``: more arguments, as
        -incoming)."""
        self._make_directory(instance, image, files)
        self._start([*self._command(instance, image, files), *extra], files)

    def _make_directory(self, instance, image, files):
        """The instance's directory anew: its image's name, its disk (an overlay of the image's at
        its flavor's root disk size) and its flavor's ephemeral disk, blank."""
        self._kill(files, instance["uuid"])  # a qemu a step interrupted early left, unusable
        self._remove(files)
        os.makedirs(files.directory)
        with open(files.image, "w", encoding="utf-8") as f:
            f.write(image.name)
        flavor = normalize_flavor(instance.get("flavor"))
        if image.disk is not None:
            self._make_overlay(image, files, flavor["root_gb"])
        if flavor["ephemeral_gb"]:
            qemu_img.run(["create", "-q", "-f", "qcow2", files.ephemeral, f"{flavor['ephemeral_gb']}G"],
                         f"cannot make the ephemeral disk of {instance['uuid']}", GuestFailed)

    def _command(self, instance, image, files):
        """The qemu command line of ``instance`` (at its flavor) booting ``image`` from ``files``."""
        flavor = normalize_flavor(instance.get("flavor"))
        return qemu_command(self._options.binary, self.accelerator(), instance["uuid"],
                            max(flavor["memory_mb"], 1), max(flavor["vcpus"], 1), image, files,
                            cpu=self.cpu_model(), ephemeral=os.path.exists(files.ephemeral))

    def _make_overlay(self, image, files, root_gb):
        """A qcow2 overlay of the image's disk, of the flavor's root disk (the image's size when
        the flavor says 0); a flavor smaller than the image is refused."""
        size = qemu_img.virtual_size(image.disk, image.disk_format,
                                     f"cannot read the disk of image {image.name}", GuestFailed)
        wanted = root_gb * GIB
        if wanted and wanted < size:
            raise GuestFailed(f"image {image.name}'s disk is {size / GIB:.2f} GB, more than the flavor's "
                              f"root disk of {root_gb} GB")
        args = ["create", "-q", "-f", "qcow2", "-b", os.path.abspath(image.disk), "-F", image.disk_format,
                files.disk]
        if wanted:
            args.append(str(wanted))
        qemu_img.run(args, f"cannot make the disk of the instance from image {image.name}", GuestFailed)

    def _start(self, argv, files):
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=self._options.boot_timeout, cwd=files.directory)
        except FileNotFoundError:
            raise GuestFailed(f"cannot run {argv[0]} ([qemu] binary): not found") from None
        except subprocess.TimeoutExpired:
            raise GuestFailed(f"qemu did not start within {self._options.boot_timeout:g} s") from None
        if done.returncode != 0:
            # Once it has daemonized, qemu says why it stops in its log (-D), not on stderr.
            said = [line for line in done.stderr.splitlines() if line.strip()][-1:] or _lines(files.log)[-2:]
            why = " | ".join(said) if said else f"exit status {done.returncode}"
            raise GuestFailed(f"qemu did not start: {why}")

    def _wait_until_up(self, files, uuid, image, since=0):
        """Until QMP says the guest runs and, when its image names one, its console_ready line is on its
        console (past byte ``since``: a guest booted again); GuestFailed when the guest dies first,
        or boot_timeout passes."""
        deadline = time.monotonic() + self._options.boot_timeout
        while True:
            pid = files.read_pid()
            if not processes.runs(pid, uuid):
                raise GuestFailed(f"the guest died during boot; its console's last lines: "
                                  f"{files.console_tail() or '(empty)'}")
            try:
                state = qmp.status(files.qmp)
            except qmp.QMPError:
                state = None  # not listening yet, or quitting: asked again
            if state in ENDED or state == SHUT_DOWN:
                raise GuestFailed(f"the guest is {state} during boot; its console's last lines: "
                                  f"{files.console_tail() or '(empty)'}")
            ready = image.console_ready is None or _says(files.console, image.console_ready, since)
            if state == "running" and ready:
                return
            if _says(files.console, PANIC, since):  # a guest without pvpanic: it may reboot in a loop
                raise GuestFailed(f"the guest's kernel panicked during boot; its console's last lines: "
                                  f"{files.console_tail() or '(empty)'}")
            if time.monotonic() >= deadline:
                waited = f"to say {image.console_ready!r}" if state == "running" else "to run"
                raise GuestFailed(f"the guest did not come up within {self._options.boot_timeout:g} s "
                                  f"([qemu] boot_timeout): waited {waited}; its console's last lines: "
                                  f"{files.console_tail() or '(empty)'}")
            self._wait(0.2)

    def destroy(self, instance):
        """Tell qemu to quit (killed after stop_timeout), then remove the instance's files."""
        uuid = instance["uuid"]
        files = self._files(uuid)
        self._end(files, uuid)
        self._kill(files, uuid)
        self._remove(files)

    # -- power -------------------------------------------------------------------

    def power_off(self, instance):
        """Ask the guest to shut down (ACPI's power button), and end its qemu after stop_timeout if
        it has not; its disk and console stay."""
        uuid = instance["uuid"]
        files = self._files(uuid)
        pid = files.read_pid()
        if not processes.runs(pid, uuid):
            return  # off already (a step run again after a restart)
        if not self._powered_down(files, uuid, pid):
            LOG.info("The guest of %s did not shut down within %g s ([qemu] stop_timeout); ending its qemu",
                     uuid, self._options.stop_timeout)
        self._end(files, uuid)

    def power_on(self, instance):
        """Boot the instance's guest again from its own disk; GuestFailed as a build."""
        uuid = instance["uuid"]
        files = self._files(uuid)
        if processes.runs(files.read_pid(), uuid):
            return  # on already
        # The image its disk was made from: the agent's record of a stopped instance names none.
        saved = files.read_image()
        image = images.find(self._options.images_path, saved) if saved else self.image_of(instance)
        since = _size(files.console)
        self._start(self._command(instance, image, files), files)
        try:
            self._wait_until_up(files, uuid, image, since)
        except base.BuildAborted:
            raise
        except BaseException:
            self._kill(files, uuid)
            raise

    def reboot(self, instance, hard=False):
        """Soft: the guest shuts down, then boots again; hard: its qemu ended at once, then booted
        again. Either way from its own disk, in a new qemu."""
        if hard:
            self._end(self._files(instance["uuid"]), instance["uuid"])
        else:
            self.power_off(instance)
        self.power_on(instance)

    def restore_power_state(self, instance, powered_on):
        if not powered_on and processes.runs(self._files(instance["uuid"]).read_pid(), instance["uuid"]):
            LOG.info("The guest of %s runs but its instance is SHUTOFF: powering it off", instance["uuid"])
            self.power_off(instance)

    def console_output(self, instance, lines=None):
        """The guest's serial console (its console.log), the last ``lines`` lines."""
        try:
            with open(self._files(instance["uuid"]).console, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            return []
        kept = [line.rstrip("\r") for line in text.split("\n")]
        if kept and kept[-1] == "":
            kept.pop()
        return kept if lines is None else kept[-lines:] if lines > 0 else []

    def _end(self, files, uuid):
        """End the qemu of ``uuid`` (quit over QMP, killed after stop_timeout), its files kept."""
        pid = files.read_pid()
        if not processes.runs(pid, uuid):
            return
        if not self._ended_by(files, uuid, pid, "quit"):
            LOG.warning("The qemu of %s (pid %s) did not quit within %g s; killing it", uuid, pid,
                        self._options.stop_timeout)
            self._kill(files, uuid)

    def _powered_down(self, files, uuid, pid):
        """Press the guest's power button (ACPI) and wait up to stop_timeout for it to power off;
        whether it did (its qemu then waits, the guest shut down, or is gone)."""
        try:
            with qmp.QMP(files.qmp) as monitor:
                monitor.execute("system_powerdown")
        except qmp.QMPError as exc:
            LOG.warning("Cannot press the power button of the guest of %s (%s)", uuid, exc)
        deadline = time.monotonic() + self._options.stop_timeout
        while processes.runs(pid, uuid):
            try:
                if qmp.status(files.qmp) == SHUT_DOWN:
                    return True
            except qmp.QMPError:
                pass  # quitting, or not answering: asked again
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def shut_down(self, instances):
        """{uuid: why} of the guests of ``instances`` that powered themselves off (the guest's own
        poweroff): their qemu, which waited, is ended; the agent records them SHUTOFF."""
        found = {}
        for uuid in instances:
            files = self._files(uuid)
            if not processes.runs(files.read_pid(), uuid) or cold_migration.handed_over(files):
                continue  # gone, or powered off here for a cold move out
            try:
                state = qmp.status(files.qmp)
            except qmp.QMPError:
                continue
            if state == SHUT_DOWN:
                self._end(files, uuid)
                found[uuid] = (f"its guest powered itself off; its console's last lines: "
                               f"{files.console_tail() or '(empty)'}")
        return found

    def _ended_by(self, files, uuid, pid, command):
        """Send ``command`` (quit, system_powerdown) to the qemu ``pid`` of ``uuid`` and wait up to
        stop_timeout for it to end; whether it did."""
        try:
            with qmp.QMP(files.qmp) as monitor:
                monitor.execute(command)
        except qmp.QMPError as exc:
            LOG.warning("Cannot send %s to the qemu of %s (%s)", command, uuid, exc)
        return processes.wait_gone(pid, uuid, self._options.stop_timeout)

    def attach(self, instances):
        """Take back the guests of ``instances`` (uuids) at start: each whose qemu still runs is
        looked at over QMP; {uuid: reason} of those whose guest is gone or ended, their console
        and disk kept (a delete removes them). CannotStart when another agent uses instances_path."""
        self._hold_instances_path()
        lost = {}
        for uuid in instances:
            why = self._why_lost(uuid)
            if why is not None:
                lost[uuid] = why
            else:
                LOG.info("Re-attached to the guest of %s (qemu pid %s)", uuid, self._files(uuid).read_pid())
        return lost

    def lost(self, instances):
        """{uuid: reason} of the guests of ``instances`` that died or ended since."""
        lost = {}
        for uuid in instances:
            why = self._why_lost(uuid)
            if why is not None:
                lost[uuid] = why
        return lost

    def _why_lost(self, uuid):
        """Why the guest of ``uuid`` no longer runs here (gone, not answering, ended), or None."""
        files = self._files(uuid)
        if cold_migration.handed_over(files):
            return None  # off for a cold move out: it runs on the destination, or here again once aborted
        pid = files.read_pid()
        if not processes.runs(pid, uuid):
            return (f"its guest is gone (no qemu{f' with pid {pid}' if pid else ''} runs it); its "
                    f"console's last lines: {files.console_tail() or '(empty)'}")
        try:
            state = qmp.status(files.qmp)
        except qmp.QMPError as exc:
            return f"its qemu (pid {pid}) runs but does not answer on QMP: {exc}"
        if state in ENDED:
            return f"its guest is {state}; its console's last lines: {files.console_tail() or '(empty)'}"
        return None

    def guests_running(self):
        """The uuids of the instances whose qemu runs in this agent's instances_path."""
        found = []
        for directory in sorted(glob.glob(os.path.join(self.instances_path, "*", ""))):
            uuid = os.path.basename(os.path.dirname(directory))
            if processes.runs(self._files(uuid).read_pid(), uuid):
                found.append(uuid)
        return found

    def _hold_instances_path(self):
        """Lock instances_path for this agent: a live migration between two agents sharing it
        would have both make and remove the same instance's directory."""
        path = self.instances_path
        os.makedirs(path, exist_ok=True)
        fd = os.open(os.path.join(path, ".agent.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise base.CannotStart(
                f"[qemu] instances_path {path} is used by another agent on this machine: give each agent "
                "an instances_path of its own") from None
        self._path_lock = fd

    def stop(self):
        super().stop()
        fd, self._path_lock = getattr(self, "_path_lock", None), None
        if fd is not None:
            os.close(fd)

    def _kill(self, files, uuid):
        pid = files.read_pid()
        if pid and not processes.kill(pid, uuid):
            LOG.error("The qemu of %s (pid %s) is still there after SIGKILL", uuid, pid)

    @staticmethod
    def _remove(files):
        if not nbd.stop(files.directory, cold_migration.disks(files)):
            LOG.error("A qemu-nbd serving the disks of %s is still there after SIGKILL", files.directory)
        shutil.rmtree(files.directory, ignore_errors=True)




def _lines(path):
    """The lines of the file ``path`` that say something ([] when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.strip() for line in f.read().splitlines() if line.strip()]
    except OSError:
        return []


def _says(path, text, since=0):
    try:
        with open(path, "rb") as f:
            f.seek(since)
            return text.encode() in f.read()
    except OSError:
        return False


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
