"""ImagePropertiesFilter: the host must run the image's architecture, hypervisor and VM mode.

The image asks with ``hw_architecture`` (or ``architecture``),
``img_hv_type`` (or ``hypervisor_type``) and ``hw_vm_mode`` (or
``vm_mode``); the host offers what its agent reports as
``supported_instances`` ([architecture, hypervisor_type, vm_mode] triples)
or as ``cpu_arch`` / ``hypervisor_type`` / ``vm_modes``. An image that asks
for none of them fits anywhere; one that asks fails on a host that reports
nothing.
"""

from scheduler import filters

_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "i386": "i686", "i486": "i686", "i586": "i686",
                 "arm64": "aarch64"}
_VM_MODE_ALIASES = {"hv": "hvm", "pv": "xen", "baremetal": "hvm"}


def _prop(props, *names):
    for name in names:
        value = props.get(name)
        if value not in (None, ""):
            return str(value).lower()
    return None


def requested(spec):
    """(architecture, hypervisor_type, vm_mode) the image asks for, None where it does not."""
    props = spec.image_properties
    arch = _prop(props, "hw_architecture", "architecture")
    hv_type = _prop(props, "img_hv_type", "hypervisor_type")
    vm_mode = _prop(props, "hw_vm_mode", "vm_mode")
    return (
        _ARCH_ALIASES.get(arch, arch),
        hv_type,
        _VM_MODE_ALIASES.get(vm_mode, vm_mode),
    )


def supports(supported_instances, wanted):
    if not supported_instances:
        return False
    for triple in supported_instances:
        canonical = (_ARCH_ALIASES.get(triple[0], triple[0]), triple[1],
                     _VM_MODE_ALIASES.get(triple[2], triple[2]))
        if all(w is None or w == c for w, c in zip(wanted, canonical, strict=True)):
            return True
    return False


class ImagePropertiesFilter(filters.BaseHostFilter):
    run_filter_once_per_request = True

    def host_passes(self, host_state, spec):
        wanted = requested(spec)
        if not any(wanted):
            return True
        return supports(host_state.supported_instances, wanted)

    def filter_vector(self, table, rows, spec):
        wanted = requested(spec)
        if not any(wanted):
            return True
        ok = table.categories["instances"].each(lambda offered: supports(offered, wanted), key=wanted)
        return ok[table.instances_code[rows]]
