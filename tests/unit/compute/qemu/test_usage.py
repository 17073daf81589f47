"""What the qemu driver measures of its guests, read from a process of this test's own: the CPU
time it spends between two samples and the resident part of a RAM block it maps."""

import ctypes
import mmap
import os
import time

import pytest

from compute_agent.driver.qemu.usage import UsageMeter, host_load

MIB = 1024 * 1024


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _burn(seconds):
    """Spend about ``seconds`` of CPU time in this process."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        sum(range(1000))


def test_a_guests_cpu_is_its_cpu_time_between_two_samples_in_cores():
    clock = Clock()
    meter = UsageMeter(clock)
    meter.guest("g", os.getpid(), 1)
    _burn(0.3)
    clock.now += 0.6  # 0.3 s of CPU in 0.6 s of the meter's time: half a core
    cores = meter.guest("g", os.getpid(), 1)["cpu"]
    assert 0.45 <= cores <= 0.6
    clock.now += 10.0  # idle since: almost nothing
    assert meter.guest("g", os.getpid(), 1)["cpu"] < 0.05


def _anonymous(size):
    """A private anonymous mapping of ``size`` bytes, as qemu maps its guest's RAM (Python's mmap
    maps /dev/zero), marked as qemu marks it so that it is never merged with its neighbours."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long]
    address = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                        -1, 0)
    assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    assert libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t(size), mmap.MADV_DONTDUMP) == 0
    return libc, address


def test_a_guests_memory_is_what_it_touched_of_its_ram_block():
    size = 72 * MIB  # no thread arena's size
    libc, address = _anonymous(size)
    try:
        meter = UsageMeter()
        before = meter.guest("g", os.getpid(), 72)["memory"]
        ctypes.memset(address, 1, 24 * MIB)
        touched = meter.guest("g", os.getpid(), 72)["memory"]  # the block found before, read again
    finally:
        libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
    assert before <= 1.0 and 23.5 <= touched <= 24.5


def test_a_guest_whose_process_is_gone_has_no_figures():
    assert UsageMeter().guest("g", 2 ** 22 + 17, 64) is None  # above any pid_max


def test_the_host_load_reserves_each_flavor_and_measures_the_machine():
    meter = UsageMeter()
    load = host_load(meter, {"a": {"vcpus": 2, "memory_mb": 512}, "b": {"vcpus": 1, "memory_mb": 256}},
                     memory_mb=4096, reserved_cpus=1, reserved_memory_mb=128)
    assert (load.cpu_reserved, load.memory_reserved_mb) == (4.0, 896.0)
    assert (load.cpu_burst, load.memory_burst_mb, load.cpu_undeployed_reservation) == (0.0, 0.0, 0.0)
    assert 0.0 <= load.cpu_utilization <= 1.0 and 0.0 < load.memory_mb_in_use <= 4096.0


@pytest.mark.parametrize("flavor_mb", [64])
def test_the_driver_reports_its_running_guests_and_says_it_measures(qemu_conf, flavor_mb, monkeypatch):
    from compute_agent.driver.qemu import driver as qemu_driver
    from compute_agent.driver.qemu.driver import QemuDriver

    driver = QemuDriver(qemu_conf)
    assert driver.capabilities.measures_usage
    ours = "0a4e2b6c-0000-4000-8000-000000000001"
    monkeypatch.setattr(qemu_driver.processes, "runs", lambda pid, uuid: uuid == ours)
    monkeypatch.setattr(qemu_driver.GuestFiles, "read_pid", lambda self: os.getpid())
    measured = driver.measure({ours: {"vcpus": 1, "memory_mb": flavor_mb},
                               "0a4e2b6c-0000-4000-8000-000000000002": {"vcpus": 1, "memory_mb": 64}})
    assert list(measured["instance_usage"]) == [ours]
    assert set(measured["instance_usage"][ours]) == {"cpu", "memory"}
    assert measured["load"].cpu_reserved == 2.0
