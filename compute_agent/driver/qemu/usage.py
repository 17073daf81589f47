"""What guests really use, read from /proc: each qemu process's CPU time and the resident part of
its guest's RAM, and the host's CPU and memory. The figures the reports carry as ``load`` and
``instance_usage`` (compute_agent.load_model says what each means), measured instead of drawn.

An instance's CPU is the CPU time its qemu spent since the previous sample, over the time
between the two, in cores (a guest busy on one vCPU under TCG shows about one core): its
emulation's cost included, which is what the host pays for it. Its memory is the resident part
of the guest's RAM block (the smallest anonymous mapping of its qemu at least as large as the
flavor's memory): the memory the guest has touched, without qemu's own.
"""

import dataclasses
import re
import time

import psutil

from berth_contract.host_report import HostLoad
from compute_agent.resource_tracker import isotime

MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Sample:
    pid: int
    cpu_seconds: float
    at: float  # time.monotonic()


class UsageMeter:
    """Samples qemu processes and the host; each call compares with the one before it."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._guests: dict[str, Sample] = {}
        self._blocks: dict[str, tuple[int, bytes | None]] = {}  # uuid -> (pid, its RAM block's header)
        self._host: tuple[float, float] | None = None  # (busy, total) CPU seconds of the host

    def guest(self, uuid, pid, memory_mb):
        """{"cpu": cores used, "memory": MB of guest RAM resident}, or None when ``pid`` cannot be
        read (the process is gone)."""
        try:
            process = psutil.Process(pid)
            times = process.cpu_times()
            ram = self._guest_ram(uuid, pid, memory_mb, process)
        except (psutil.Error, OSError):
            self._guests.pop(uuid, None)
            self._blocks.pop(uuid, None)
            return None
        now = self._clock()
        spent = times.user + times.system
        before = self._guests.get(uuid)
        self._guests[uuid] = Sample(pid, spent, now)
        if before is None or before.pid != pid or now <= before.at:
            elapsed = max(time.time() - process.create_time(), 1e-3)
            cores = spent / elapsed
        else:
            cores = max(spent - before.cpu_seconds, 0.0) / (now - before.at)
        return {"cpu": round(cores, 4), "memory": round(ram / MIB, 1)}

    def _guest_ram(self, uuid, pid, memory_mb, process):
        """Bytes resident of the guest's RAM block, found once per qemu process (smaps read whole
        each time, searched for that block's line: a few hundred mappings otherwise parsed); the
        whole process's resident memory when it has no such block."""
        with open(f"/proc/{pid}/smaps", "rb") as f:
            smaps = f.read()
        block = self._blocks.get(uuid)
        if block is None or block[0] != pid:
            block = self._blocks[uuid] = (pid, _ram_block(smaps, memory_mb))
        rss = _rss_after(smaps, block[1]) if block[1] is not None else None
        if rss is None:
            return process.memory_info().rss
        return rss

    def forget_others(self, uuids):
        """Drop the samples of guests not in ``uuids`` (deleted or moved away)."""
        for uuid in set(self._guests) - set(uuids):
            del self._guests[uuid]
            self._blocks.pop(uuid, None)

    def host_cpu(self):
        """The share of the host's CPU time busy since the previous sample (since boot, the first
        time), 0 to 1."""
        times = psutil.cpu_times()
        total = sum(times)
        busy = total - times.idle - getattr(times, "iowait", 0.0)
        before, self._host = self._host, (busy, total)
        if before is None or total <= before[1]:
            return busy / total if total else 0.0
        return min(max((busy - before[0]) / (total - before[1]), 0.0), 1.0)


#: A mapping's header line in /proc/PID/smaps: its addresses, and its path (empty when anonymous).
_HEADER = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+ *(.*)$", re.MULTILINE)


def _ram_block(smaps, memory_mb):
    """The header of the guest's RAM block in ``smaps`` (bytes): qemu maps it as one anonymous
    block of the flavor's memory (beside larger ones, as TCG's translation buffer), the smallest
    anonymous mapping of at least ``memory_mb``; None if there is none (another qemu's layout)."""
    wanted, best = memory_mb * MIB, None
    for found in _HEADER.finditer(smaps):
        if found.group(3) not in (b"", b"[anon]"):
            continue
        size = int(found.group(2), 16) - int(found.group(1), 16)
        if size >= wanted and (best is None or size < best[0]):
            best = (size, found.group(0).split(b" ", 1)[0] + b" ")
    return None if best is None else best[1]


def _rss_after(smaps, header):
    """The Rss (bytes) of the mapping whose header line starts with ``header``, or None."""
    at = smaps.find(b"\n" + header)
    if at < 0:
        return None
    rss = smaps.find(b"\nRss:", at + 1)
    if rss < 0:
        return None
    return int(smaps[rss + 5:smaps.index(b"kB", rss)].strip()) * 1024


def host_load(meter, instances, memory_mb, reserved_cpus=0, reserved_memory_mb=0, now=None):
    """The host's measured load (its whole CPU and memory, as CloudStack's agents report them) and
    its reservations: each running instance reserves its whole flavor."""
    memory = psutil.virtual_memory()
    in_use = (memory.total - memory.available) / MIB
    reserved_cpu = float(reserved_cpus) + sum(f.get("vcpus", 0) for f in instances.values())
    reserved_memory = float(reserved_memory_mb) + sum(f.get("memory_mb", 0) for f in instances.values())
    return HostLoad(
        cpu_utilization=round(meter.host_cpu(), 4),
        memory_mb_in_use=min(round(in_use, 1), float(memory_mb)),
        utilization_sampled_at=isotime(now),
        cpu_reserved=reserved_cpu,
        cpu_burst=0.0,
        cpu_undeployed_reservation=0.0,
        memory_reserved_mb=reserved_memory,
        memory_burst_mb=0.0,
        memory_undeployed_reservation_mb=0.0,
    )
