"""ImagePropertiesFilter: the host must run the image's architecture, hypervisor and VM mode.

The image asks with ``hw_architecture`` (or ``architecture``),
``img_hv_type`` (or ``hypervisor_type``) and ``hw_vm_mode`` (or
``vm_mode``); where an image gives both names the standard one wins
(berth_contract/image_meta.py); the host offers what its agent reports as
``supported_instances`` ([architecture, hypervisor_type, vm_mode] triples)
or as ``cpu_arch`` / ``hypervisor_type`` / ``vm_modes``. An image that asks
for none of them fits anywhere; one that asks fails on a host that reports
nothing.

As Nova's: names are canonicalized (``amd64`` is ``x86_64``, ``xapi`` is
``xen``, ``pv`` is ``xen``...), and each value the image asks for may be
found anywhere in one of the host's triples. Once the image asks for one of
them, ``img_hv_requested_version`` (or ``hypervisor_version_requires``:
``>=6.0``, ``>=5.4,<7``) must hold for the host's hypervisor version, and
the host's CPU must address at least ``hw_maxphysaddr_bits`` bits; a host
that reports no version (or no address width) passes that check. A malformed version predicate or bit count
refuses the request (Nova raises on the first, and Nova 34 raises on every
``hw_maxphysaddr_bits``, reading its cpu_info text as a dict).
"""

import json
import math

import numpy as np
from oslo_config import cfg
from oslo_utils import versionutils

from berth_contract import image_meta
from berth_contract.image_meta import canonical
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


_TRIPLE = ("hw_architecture", "img_hv_type", "hw_vm_mode")


def _canonical(triple):
    """An (architecture, hypervisor_type, vm_mode) triple in canonical form, None where empty."""
    return tuple(canonical(name, None if value in (None, "") else str(value))
                 for name, value in zip(_TRIPLE, triple, strict=True))


def requested(spec, default_architecture=None):
    """(architecture, hypervisor_type, vm_mode) the image asks for, None where it does not."""
    props = image_meta.standard(spec.image_properties)
    if props.get("hw_architecture") in (None, ""):
        props["hw_architecture"] = default_architecture
    return _canonical(tuple(props.get(name) for name in _TRIPLE))


def supports(supported_instances, wanted):
    if not supported_instances:
        return False
    for triple in supported_instances:
        offered = _canonical(triple)
        if all(w is None or w in offered for w in wanted):
            return True
    return False


def version_predicate(spec):
    """The image's ``img_hv_requested_version`` (or legacy ``hypervisor_version_requires``) as a
    predicate, None if it asks none."""
    name = image_meta.given_name(spec.image_properties, "img_hv_requested_version")
    text = spec.image_properties.get(name)
    if text in (None, ""):
        return None
    try:
        return versionutils.VersionPredicate(str(text))
    except ValueError:
        raise ValueError(f"image property {name} {str(text)[:60]!r} is not a version "
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
    reads_image_properties = tuple(
        name for standard in ("hw_architecture", "img_hv_type", "hw_vm_mode", "img_hv_requested_version",
                              "hw_maxphysaddr_bits")
        for name in (standard, *(old for old, new in image_meta.LEGACY_NAMES.items() if new == standard)))

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
        if not (spec.image_properties or self.default_architecture):
            return True  # nothing asked for, as requested() would say
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

    def why_removed(self, table, rows, spec):
        """What the image asks for that the hosts of ``rows`` lack, part by part, and what they offer."""
        wanted = requested(spec, self.default_architecture)
        if not any(wanted):
            return None
        kinds = _kinds(table, rows)
        considered = len(rows)
        notes = []
        lacking = [(h, n) for h, n in kinds if not supports(h.supported_instances, wanted)]
        if lacking:
            asked = ", ".join(f"{name} {value}" for name, value in zip(_TRIPLE, wanted, strict=True) if value)
            offered = sorted({"/".join(str(part) for part in _canonical(triple))
                              for h, _ in lacking for triple in h.supported_instances or ()})
            shown = ", ".join(offered[:SHOWN]) + (", ..." if len(offered) > SHOWN else "")
            what = f"they offer {shown}" if offered else "they report no supported_instances"
            notes.append(f"the image asks for {asked}: {_of(sum(n for _, n in lacking), considered)} run "
                         f"none such ({what})")
        predicate = version_predicate(spec)
        if predicate is not None:
            old = sum(n for h, n in kinds if not version_ok(predicate, h.hypervisor_version))
            if old:
                name = image_meta.given_name(spec.image_properties, "img_hv_requested_version")
                notes.append(f"the hypervisor version of {_of(old, considered)} fails {name} "
                             f"{spec.image_properties.get(name)}")
        bits = maxphysaddr_bits(spec)
        if bits is not None:
            narrow = sum(n for h, n in kinds if not bits_ok(bits, h.cpu_info))
            if narrow:
                notes.append(f"{_of(narrow, considered)} address fewer than the hw_maxphysaddr_bits {bits} "
                             "the image asks")
        return "; ".join(notes) or None


def _kinds(table, rows):
    """[(a host of ``rows``, how many of them are alike in what the filter reads: their
    supported_instances, hypervisor version and cpu_info)], one entry per kind."""
    # One number per kind: the two categories' codes and the version's rank among the rows'.
    versions = np.nan_to_num(table.hypervisor_version[rows], nan=-1.0)  # -1: not reported
    _, version_rank = np.unique(versions, return_inverse=True)
    # Codes and ranks are below 2**21: a category holds at most one value per host.
    key = ((table.instances_code[rows].astype(np.int64) << 42)
           | (table.cpu_info_code[rows].astype(np.int64) << 21) | version_rank.astype(np.int64))
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    return [(table.view(int(rows[i])), int(n)) for i, n in zip(first, counts, strict=True)]


#: How many of the hosts' supported_instances triples the reason names.
SHOWN = 3


def _of(count, considered):
    """``count`` of the ``considered`` hosts, in words."""
    if count == considered:
        return "the host" if count == 1 else f"all {count} hosts"
    return f"{count} of {considered} hosts"
