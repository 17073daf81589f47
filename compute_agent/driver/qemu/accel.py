"""Which accelerator the guests run on: kvm, tcg, or auto (KVM when it works, else TCG).

KVM is tried, not taken on trust: on some hosts /dev/kvm is there but a guest under it never
runs (a nested kind of KVM that hangs stock kernels). The probe starts a guest with no disk
under KVM and waits for its firmware's first line on the serial console.
"""

import os
import subprocess
import tempfile
import time

from compute_agent.driver.base import CannotStart

CHOICES = ("kvm", "tcg", "auto")
KVM_DEVICE = "/dev/kvm"
#: What SeaBIOS, the firmware of qemu's pc machine, says first on the serial console.
FIRMWARE_SAYS = b"SeaBIOS"


def choose(accel, binary, probe_timeout, kvm_device=KVM_DEVICE):
    """(accelerator, why): ``accel`` itself unless it is auto; auto is kvm when a probe guest runs
    under KVM within ``probe_timeout`` seconds, else tcg. CannotStart for kvm chosen on a host whose
    KVM device this user cannot use: every build would fail."""
    if accel == "kvm":
        unusable = _unusable(kvm_device)
        if unusable:
            raise CannotStart(f"[qemu] accel = kvm but {unusable}: load the kvm module of the CPU "
                              "(kvm_intel or kvm_amd), add the agent's user to the kvm group, or set "
                              "accel = auto or tcg")
    if accel != "auto":
        return accel, f"[qemu] accel = {accel}"
    unusable = _unusable(kvm_device)
    if unusable:
        return "tcg", f"auto: {unusable}"
    works, why = probe_kvm(binary, probe_timeout)
    return ("kvm" if works else "tcg"), f"auto: {why}"


def _unusable(kvm_device):
    """Why this user cannot use ``kvm_device``, or None."""
    if not os.path.exists(kvm_device):
        return f"no {kvm_device}"
    if not os.access(kvm_device, os.R_OK | os.W_OK):
        return f"{kvm_device} is not readable and writable by this user"
    return None


def probe_kvm(binary, timeout):
    """(whether a guest runs under KVM, what the probe saw)."""
    with tempfile.TemporaryDirectory(prefix="berth-kvm-probe-") as directory:
        console = os.path.join(directory, "console.log")
        argv = [binary, "-accel", "kvm", "-m", "16", "-nodefaults", "-no-user-config", "-display", "none",
                "-no-reboot", "-serial", f"file:{console}"]
        try:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE)
        except OSError as exc:
            return False, f"cannot run {binary}: {exc}"
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if _says(console, FIRMWARE_SAYS):
                    took = timeout - (deadline - time.monotonic())
                    return True, f"a probe guest ran under KVM in {took:.1f} s"
                if process.poll() is not None:
                    error = process.stderr.read().decode("utf-8", "replace").strip().splitlines()
                    return False, f"KVM refused a probe guest: {error[-1] if error else 'no reason given'}"
                time.sleep(0.1)
            return False, f"a probe guest under KVM said nothing within {timeout:g} s"
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            process.stderr.close()


def _says(path, text):
    try:
        with open(path, "rb") as f:
            return text in f.read()
    except OSError:
        return False
