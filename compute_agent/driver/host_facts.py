"""What a compute host is, as Nova's compute nodes report it: architecture, cpu_info, hypervisor
version, address.

``cpu_info`` is a dict in the shape Nova's libvirt driver reports (``arch``,
``model``, ``vendor``, ``topology``, ``features``, ``maxphysaddr``); a flavor matches it with
``capabilities:cpu_info:features <in> avx2``. Versions are counted as Nova
counts them: major * 1,000,000 + minor * 1,000 + micro.
"""

import os
import platform
import re
import socket

from berth_contract import image_meta

CPUINFO = "/proc/cpuinfo"
#: platform.machine()'s names that Nova spells otherwise, besides image_meta.ARCHITECTURE_ALIASES
#: (amd64, i386...): macOS and the BSDs say arm64.
MACHINE_ALIASES = {"arm64": "aarch64"}


def machine_arch(machine=None):
    """This machine's architecture (``machine``: as platform.machine() says it) by Nova's name:
    x86_64, aarch64, i686, ppc64le, s390x...; None when the platform does not say."""
    name = platform.machine() if machine is None else machine
    if not name:
        return None
    text = image_meta.canonical("hw_architecture", name)
    return MACHINE_ALIASES.get(text, text)


def version_to_int(text):
    """``6.1.0-28-amd64`` -> 6001000 (Nova's convert_version_to_int of the numeric part)."""
    parts = [int(p) for p in re.findall(r"\d+", text.split("-")[0])[:3]]
    parts += [0] * (3 - len(parts))
    return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]


def cpu_info(arch=None, features=(), cpuinfo_path=CPUINFO):
    """This machine's CPU: architecture, model, vendor, topology and feature flags."""
    fields = {}
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() not in fields:
                    fields[key.strip()] = value.strip()
    except OSError:
        pass
    flags = fields.get("flags") or fields.get("Features") or ""
    threads = os.cpu_count() or 1
    info = {
        "arch": arch or machine_arch(),
        "model": fields.get("model name") or fields.get("cpu model") or None,
        "vendor": fields.get("vendor_id") or fields.get("CPU implementer") or None,
        "topology": {"sockets": 1, "cores": threads, "threads": 1},
        "features": sorted(set(flags.split()) | set(features)),
    }
    bits = re.match(r"(\d+) bits physical", fields.get("address sizes", ""))
    if bits:  # as Nova's libvirt driver reports it; an image's hw_maxphysaddr_bits is matched to it
        info["maxphysaddr"] = {"mode": "passthrough", "bits": int(bits.group(1))}
    return info


def fake_cpu_info(arch, features, vcpus):
    return {"arch": arch, "model": "fake", "vendor": "fake",
            "topology": {"sockets": 1, "cores": vcpus, "threads": 1}, "features": sorted(set(features))}


def host_ip(configured=None):
    """``configured``, else the address this machine sends outside traffic from (no packet is
    sent: a UDP socket is only connected), else 127.0.0.1."""
    if configured:
        return configured
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere real
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def kernel_version():
    return version_to_int(platform.release() or "0")


def existing_ancestor(path):
    """``path`` or its nearest existing ancestor (a directory the agent has not made yet): whose
    file system the host's disk total is read from."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path
