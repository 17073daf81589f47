"""Image properties in their standard form: legacy names mapped, enumerated values canonical.

As Nova reads an image's metadata: a property given by its legacy name
(``architecture``, ``hypervisor_type``, ``vm_mode``,
``hypervisor_version_requires``...) is taken under its standard name
(``hw_architecture``, ``img_hv_type``, ``hw_vm_mode``,
``img_hv_requested_version``...), and where an image gives both names the
standard one's value wins. The architecture, hypervisor type and VM mode are
canonical: lower case, ``amd64`` is ``x86_64``, ``i386`` is ``i686``,
``xapi`` is ``xen``, ``pv`` is ``xen``, ``hv`` is ``hvm``...

Unlike Nova, Berth keeps the properties that are not among Nova's standard
ones, takes any value (Nova refuses an unknown architecture, for one), keeps
other values as given (Nova coerces booleans and numbers to their type:
``yes`` and ``true`` are both ``True`` there) and does not split the legacy
``vmware_adaptertype`` into ``hw_disk_bus`` and ``hw_scsi_model``.
"""

#: Legacy property name -> its standard name.
LEGACY_NAMES = {
    "architecture": "hw_architecture",
    "owner_id": "img_owner_id",
    "vmware_disktype": "hw_disk_type",
    "vmware_image_version": "img_version",
    "vmware_ostype": "os_distro",
    "auto_disk_config": "hw_auto_disk_config",
    "ipxe_boot": "hw_ipxe_boot",
    "xenapi_device_id": "hw_device_id",
    "xenapi_image_compression_level": "img_compression_level",
    "vmware_linked_clone": "img_linked_clone",
    "xenapi_use_agent": "img_use_agent",
    "xenapi_skip_agent_inject_ssh": "os_skip_agent_inject_ssh",
    "xenapi_skip_agent_inject_files_at_boot": "os_skip_agent_inject_files_at_boot",
    "cache_in_nova": "img_cache_in_nova",
    "vm_mode": "hw_vm_mode",
    "bittorrent": "img_bittorrent",
    "mappings": "img_mappings",
    "block_device_mapping": "img_block_device_mapping",
    "bdm_v2": "img_bdm_v2",
    "root_device_name": "img_root_device_name",
    "hypervisor_version_requires": "img_hv_requested_version",
    "hypervisor_type": "img_hv_type",
}

ARCHITECTURE_ALIASES = {"amd64": "x86_64", "i386": "i686", "i486": "i686", "i586": "i686",
                        "x86_32": "i686", "x86_32p": "i686"}
HV_TYPE_ALIASES = {"xapi": "xen"}
VM_MODE_ALIASES = {"hv": "hvm", "pv": "xen", "baremetal": "hvm"}

#: Standard name -> aliases of the enumerated properties compared in canonical form.
_ALIASES = {"hw_architecture": ARCHITECTURE_ALIASES, "img_hv_type": HV_TYPE_ALIASES,
            "hw_vm_mode": VM_MODE_ALIASES}


def canonical(name, value):
    """``value`` of the standard property ``name`` as compared: lower case with aliases resolved for
    the architecture, hypervisor type and VM mode, as given otherwise (None and '' stay as they are)."""
    aliases = _ALIASES.get(name)
    if aliases is None or value in (None, ""):
        return value
    text = str(value).lower()
    return aliases.get(text, text)


def standard(properties):
    """{standard name: canonical value} of an image's ``properties``."""
    named = {LEGACY_NAMES[k]: v for k, v in properties.items() if k in LEGACY_NAMES}
    named.update((k, v) for k, v in properties.items() if k not in LEGACY_NAMES)
    return {k: canonical(k, v) for k, v in named.items()}


def given_name(properties, name):
    """The name under which ``properties`` give the standard property ``name``: ``name`` itself, or
    its legacy name when only that one is given (for messages that quote what the user wrote)."""
    if name in properties:
        return name
    legacy = [old for old, new in LEGACY_NAMES.items() if new == name and old in properties]
    return legacy[0] if legacy else name


def standard_counts(counts):
    """{standard name: {canonical value as text: count}} of per-host counts an agent reported
    ({property: {value: count}}). An agent counts each instance's properties in standard form;
    counts under a legacy name or a non-canonical value (from an agent older than that) are added
    to the standard ones."""
    merged = {}
    for name, per_value in counts.items():
        standard_name = LEGACY_NAMES.get(name, name)
        into = merged.setdefault(standard_name, {})
        for value, count in per_value.items():
            text = str(canonical(standard_name, value))
            into[text] = into.get(text, 0) + count
    return merged
