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
found anywhere in one of the host's triples.
"""

from oslo_config import cfg

from scheduler import filters

opts = [
    cfg.StrOpt(
        "image_properties_default_architecture",
        help="ImagePropertiesFilter: the architecture of an image that names none "
        "(unset: such an image fits any architecture).",
    ),
]


def register_opts(conf):
    conf.register_opts(opts, "filter_scheduler")


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


class ImagePropertiesFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def __init__(self, conf):
        super().__init__(conf)
        self.default_architecture = conf.filter_scheduler.image_properties_default_architecture

    def host_passes(self, host_state, spec):
        wanted = requested(spec, self.default_architecture)
        if not any(wanted):
            return True
        return supports(host_state.supported_instances, wanted)

    def filter_vector(self, table, rows, spec):
        wanted = requested(spec, self.default_architecture)
        if not any(wanted):
            return True
        ok = table.categories["instances"].each(lambda offered: supports(offered, wanted), key=wanted)
        return ok[table.instances_code[rows]]
