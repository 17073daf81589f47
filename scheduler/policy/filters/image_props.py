"""ImagePropertiesFilter: the host must run the image's architecture, hypervisor and VM mode.

The image asks with ``hw_architecture`` (or ``architecture``),
``img_hv_type`` (or ``hypervisor_type``) and ``hw_vm_mode`` (or
``vm_mode``); the host offers what its agent reports as
``supported_instances`` ([architecture, hypervisor_type, vm_mode] triples)
or as ``cpu_arch`` / ``hypervisor_type`` / ``vm_modes``. An image that asks
for none of them fits anywhere; one that asks fails on a host that reports
nothing.

As Nova's: names are canonicalized (``amd64`` is ``x86_64``, ``xapi`` is
``xen``, ``pv`` is ``xen``...), and each value the image asks for may be
found anywhere in one of the host's triples. Once the image asks for one of
them, ``img_hv_requested_version`` (``>=6.0``, ``>=5.4,<7``) must hold for
the host's hypervisor version, and the host's CPU must address at least
``hw_maxphysaddr_bits`` bits; a host that reports no version (or no address
width) passes that check. A malformed version predicate or bit count
refuses the request (Nova raises on the first, and Nova 34 raises on every
``hw_maxphysaddr_bits``, reading its cpu_info text as a dict).
"""

import json
import math

import numpy as np
from oslo_config import cfg
from oslo_utils import versionutils

from scheduler.policy import filters

opts = [
    cfg.StrOpt(
        "image_properties_default_architecture",
        help="ImagePropertiesFilter: the architecture of an image that names none "
        "(unset: such an image fits any architecture).",
    ),
]


def list_opts():
    return [("filter_scheduler", opts)]


# Nova's canonical names (nova.objects.fields Architecture, HVType and VMMode).
_ARCH_ALIASES = {"amd64": "x86_64", "i386": "i686", "i486": "i686", "i586": "i686",
                 "x86_32": "i686", "x86_32p": "i686"}
_HV_TYPE_ALIASES = {"xapi": "xen"}
_VM_MODE_ALIASES = {"hv": "hvm", "pv": "xen", "baremetal": "hvm"}


def _prop(props, *names):
    for name in names:
        value = props.get(name)
        if value not in (None, ""):
            return str(value).lower()
    return None


def _canonical(triple):
    arch, hv_type, vm_mode = (None if v in (None, "") else str(v).lower() for v in triple)
    return (_ARCH_ALIASES.get(arch, arch), _HV_TYPE_ALIASES.get(hv_type, hv_type),
            _VM_MODE_ALIASES.get(vm_mode, vm_mode))


def requested(spec, default_architecture=None):
    """(architecture, hypervisor_type, vm_mode) the image asks for, None where it does not."""
    props = spec.image_properties
    return _canonical((
        _prop(props, "hw_architecture", "architecture") or default_architecture,
        _prop(props, "img_hv_type", "hypervisor_type"),
        _prop(props, "hw_vm_mode", "vm_mode"),
    ))


def supports(supported_instances, wanted):
    if not supported_instances:
        return False
    for triple in supported_instances:
        offered = _canonical(triple)
        if all(w is None or w in offered for w in wanted):
            return True
    return False


def version_predicate(spec):
    """The image's ``img_hv_requested_version`` as a predicate, None if it asks none."""
    text = spec.image_properties.get("img_hv_requested_version")
    if text in (None, ""):
        return None
    try:
        return versionutils.VersionPredicate(str(text))
    except ValueError:
        raise ValueError(f"image property img_hv_requested_version {str(text)[:60]!r} is not a version "
                         "predicate such as '>=6.0' or '>=5.4,<7'") from None


def maxphysaddr_bits(spec):
    """The image's ``hw_maxphysaddr_bits``, None if it asks none."""
    value = spec.image_properties.get("hw_maxphysaddr_bits")
    if value in (None, ""):
        return None
    try:
        bits = int(str(value))
    except ValueError:
        bits = 0
    if not 1 <= bits <= 128:
        raise ValueError(f"image property hw_maxphysaddr_bits {str(value)[:60]!r} is not a number of "
                         "bits between 1 and 128")
    return bits


def version_ok(predicate, hypervisor_version):
    if predicate is None or not hypervisor_version:
        return True
    return predicate.satisfied_by(versionutils.convert_version_to_str(int(hypervisor_version)))


def bits_ok(bits, cpu_info):
    """Whether ``cpu_info`` (JSON text, as HostState holds it) addresses ``bits`` bits."""
    if bits is None or not cpu_info:
        return True
    try:
        reported = (json.loads(cpu_info).get("maxphysaddr") or {}).get("bits")
    except (ValueError, AttributeError):
        return True
    return not reported or reported >= bits


class ImagePropertiesFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def __init__(self, conf):
        super().__init__(conf)
        self.default_architecture = conf.filter_scheduler.image_properties_default_architecture

    def check_hints(self, spec):
        version_predicate(spec)
        maxphysaddr_bits(spec)

    def host_passes(self, host_state, spec):
        wanted = requested(spec, self.default_architecture)
        if not any(wanted):
            return True
        return (supports(host_state.supported_instances, wanted)
                and version_ok(version_predicate(spec), host_state.hypervisor_version)
                and bits_ok(maxphysaddr_bits(spec), host_state.cpu_info))

    def filter_vector(self, table, rows, spec):
        wanted = requested(spec, self.default_architecture)
        if not any(wanted):
            return True
        ok = table.categories["instances"].each(lambda offered: supports(offered, wanted), key=wanted)
        ok = ok[table.instances_code[rows]]
        predicate = version_predicate(spec)
        if predicate is not None:
            versions = table.hypervisor_version[rows]
            distinct, where = np.unique(versions, return_inverse=True)
            answers = np.fromiter((math.isnan(v) or version_ok(predicate, v) for v in distinct),
                                  dtype=bool, count=len(distinct))
            ok = ok & answers[where]
        bits = maxphysaddr_bits(spec)
        if bits is not None:
            wide = table.categories["cpu_info"].each(lambda info: bits_ok(bits, info),
                                                     key=("maxphysaddr", bits))
            ok = ok & wide[table.cpu_info_code[rows]]
        return ok
