"""Image properties in their standard form: legacy names mapped, enumerated values canonical.

As Nova reads an image's metadata: a property given by its legacy name
(``architecture``, ``hypervisor_type``, ``vm_mode``,
``hypervisor_version_requires``...) is taken under its standard name
(``hw_architecture``, ``img_hv_type``, ``hw_vm_mode``,
``img_hv_requested_version``...), and where an image gives both names the
standard one's value wins. The architecture, hypervisor type and VM mode are
canonical: lower case, ``amd64`` is ``x86_64``, ``i386`` is ``i686``,
``xapi`` is ``xen``, ``pv`` is ``xen``, ``hv`` is ``hvm``...

``os_type``, ``hw_scsi_model`` and ``hw_vif_model`` are lower case too
(``Linux`` is ``linux``), the last two with their VMware aliases resolved
(``VirtualE1000`` is ``e1000``), as Nova's fields make them.

Unlike Nova, ``standard`` keeps the properties that are not among Nova's
standard ones, takes any value (Nova refuses an unknown architecture, for
one), keeps other values as given (Nova coerces booleans and numbers to their
type: ``yes`` and ``true`` are both ``True`` there) and does not split the
legacy ``vmware_adaptertype`` into ``hw_disk_bus`` and ``hw_scsi_model``.
``nova_props`` does all that as Nova's ImageMetaProps does, for
ImagePropertiesWeigher, which compares every property.
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
SCSI_MODEL_ALIASES = {"lsilogicsas": "lsisas1068", "paravirtual": "vmpvscsi"}
VIF_MODEL_ALIASES = {"virtuale1000": "e1000", "virtuale1000e": "e1000e", "virtualpcnet32": "pcnet",
                     "virtualsriovethernetcard": "sriov", "virtualvmxnet": "vmxnet",
                     "virtualvmxnet3": "vmxnet3"}

#: Standard name -> aliases of the enumerated properties compared in canonical form (lower case).
_ALIASES = {"hw_architecture": ARCHITECTURE_ALIASES, "hw_emulation_architecture": ARCHITECTURE_ALIASES,
            "img_hv_type": HV_TYPE_ALIASES, "hw_vm_mode": VM_MODE_ALIASES, "os_type": {},
            "hw_scsi_model": SCSI_MODEL_ALIASES, "hw_vif_model": VIF_MODEL_ALIASES}

#: Nova 34's ImageMetaProps fields (nova/objects/image_meta.py): the only image properties Nova keeps.
NOVA_FIELDS = frozenset({
    "hw_architecture", "hw_auto_disk_config", "hw_boot_menu", "hw_cdrom_bus", "hw_cpu_cores",
    "hw_cpu_max_cores", "hw_cpu_max_sockets", "hw_cpu_max_threads", "hw_cpu_policy", "hw_cpu_realtime_mask",
    "hw_cpu_sockets", "hw_cpu_thread_policy", "hw_cpu_threads", "hw_device_id", "hw_disk_bus", "hw_disk_type",
    "hw_emulation_architecture", "hw_ephemeral_encryption", "hw_ephemeral_encryption_format",
    "hw_ephemeral_encryption_secret_uuid", "hw_firmware_stateless", "hw_firmware_type", "hw_floppy_bus",
    "hw_input_bus", "hw_ipxe_boot", "hw_locked_memory", "hw_machine_type", "hw_maxphysaddr_bits",
    "hw_maxphysaddr_mode", "hw_mem_encryption", "hw_mem_encryption_model", "hw_mem_page_size",
    "hw_numa_cpus", "hw_numa_mem", "hw_numa_nodes", "hw_pci_numa_affinity_policy", "hw_pmu",
    "hw_pointer_model", "hw_qemu_guest_agent", "hw_redirected_usb_ports", "hw_rescue_bus",
    "hw_rescue_device", "hw_rng_model", "hw_scsi_model", "hw_serial_port_count", "hw_sound_model",
    "hw_time_hpet", "hw_tpm_model", "hw_tpm_version", "hw_usb_model", "hw_video_model", "hw_video_ram",
    "hw_vif_model", "hw_vif_multiqueue_enabled", "hw_viommu_model", "hw_virtio_packed_ring", "hw_vm_mode",
    "hw_watchdog_action", "img_bdm_v2", "img_bittorrent", "img_block_device_mapping", "img_cache_in_nova",
    "img_compression_level", "img_config_drive", "img_hide_hypervisor_id", "img_hv_requested_version",
    "img_hv_type", "img_linked_clone", "img_mappings", "img_owner_id", "img_root_device_name",
    "img_signature", "img_signature_certificate_uuid", "img_signature_hash_method",
    "img_signature_key_type", "img_use_agent", "img_version", "os_admin_user", "os_command_line",
    "os_distro", "os_require_quiesce", "os_secure_boot", "os_skip_agent_inject_files_at_boot",
    "os_skip_agent_inject_ssh", "os_type", "traits_required",
})
#: Of NOVA_FIELDS, the flexible booleans: Nova reads ``1``, ``t``, ``true``, ``on``, ``y`` and
#: ``yes`` (any case, spaces around) as True, anything else as False.
BOOLEAN_FIELDS = frozenset({
    "hw_boot_menu", "hw_ephemeral_encryption", "hw_firmware_stateless", "hw_ipxe_boot", "hw_locked_memory",
    "hw_mem_encryption", "hw_pmu", "hw_qemu_guest_agent", "hw_time_hpet", "hw_vif_multiqueue_enabled",
    "hw_virtio_packed_ring", "img_bdm_v2", "img_bittorrent", "img_cache_in_nova", "img_hide_hypervisor_id",
    "img_linked_clone", "img_use_agent", "os_require_quiesce", "os_skip_agent_inject_files_at_boot",
    "os_skip_agent_inject_ssh",
})
_TRUE = frozenset(("1", "t", "true", "on", "y", "yes"))
#: Of NOVA_FIELDS, the integers: Nova reads them with int() (``04`` is 4).
INTEGER_FIELDS = frozenset({
    "hw_cpu_cores", "hw_cpu_max_cores", "hw_cpu_max_sockets", "hw_cpu_max_threads", "hw_cpu_sockets",
    "hw_cpu_threads", "hw_device_id", "hw_maxphysaddr_bits", "hw_numa_nodes", "hw_redirected_usb_ports",
    "hw_serial_port_count", "hw_video_ram", "img_compression_level", "img_version",
})
#: Of NOVA_FIELDS, those Nova builds from other properties only (``hw_numa_cpus.0``...,
#: ``trait:NAME=required``), never from a property of their own name.
_BUILT = frozenset({"hw_numa_cpus", "hw_numa_mem", "traits_required"})
#: The properties Nova's compute leaves out of an instance's system metadata (nova.utils.SM_SKIP_KEYS).
NOT_KEPT = frozenset({"mappings", "block_device_mapping", "img_mappings", "img_block_device_mapping"})


def canonical(name, value):
    """``value`` of the standard property ``name`` as compared: lower case with aliases resolved for
    the enumerated properties of _ALIASES (the architecture, hypervisor type, VM mode, OS type...),
    as given otherwise (None and '' stay as they are)."""
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


def nova_value(name, value):
    """``value`` of the standard property ``name`` as text, as Nova's ImageMetaProps holds it:
    canonical (``canonical``), a boolean field's True or False, an integer field's number. A value
    Nova refuses (an integer field's ``four``) stays as given."""
    value = canonical(name, value)
    if name in BOOLEAN_FIELDS:
        value = value if isinstance(value, bool) else str(value).strip().lower() in _TRUE
    elif name in INTEGER_FIELDS and not isinstance(value, bool):
        try:
            value = int(value)
        except (TypeError, ValueError):
            pass
    return str(value)


def nova_props(properties):
    """{field: value as text} of an image's ``properties`` as Nova's ImageMetaProps has them
    (what Nova's ImagePropertiesWeigher compares): legacy names mapped, ``vmware_adaptertype``
    split into ``hw_disk_bus`` and ``hw_scsi_model``, the standard names winning; only Nova's
    fields (NOVA_FIELDS) kept, values as ``nova_value`` reads them; ``traits_required`` the list of
    the traits ``trait:NAME=required`` names. The NUMA lists Nova builds from ``hw_numa_cpus.0``...
    are left out."""
    named = {}
    adapter = properties.get("vmware_adaptertype")
    if adapter == "ide":
        named["hw_disk_bus"] = "ide"
    elif adapter:
        named.update(hw_disk_bus="scsi", hw_scsi_model=adapter)
    named.update(standard(properties))
    props = {k: nova_value(k, v) for k, v in named.items() if k in NOVA_FIELDS and k not in _BUILT}
    traits = [str(k)[6:] for k, v in properties.items()
              if str(k).startswith("trait:") and str(v) == "required"]
    if traits:
        props["traits_required"] = str(traits)
    return props


def kept_by_compute(properties):
    """An instance's image ``properties`` as Nova's compute keeps them in its system metadata, where
    Nova's ImagePropertiesWeigher reads them back: each value as text of at most 255 bytes, the
    large structured ones (NOT_KEPT) left out."""
    return {k: str(v).encode()[:255].decode(errors="ignore")
            for k, v in properties.items() if k not in NOT_KEPT}


def standard_counts(counts):
    """{field: {value as text: count}} of per-host counts an agent reported ({property: {value:
    count}}) of the properties Nova's ImagePropertiesWeigher compares. An agent counts each
    instance's properties as ``nova_props`` reads them; counts under a legacy name, a value Nova
    reads otherwise, or a property that is not one of Nova's fields (from an agent older than
    that) are added to the field's or dropped."""
    merged = {}
    for name, per_value in counts.items():
        standard_name = LEGACY_NAMES.get(name, name)
        if standard_name not in NOVA_FIELDS:
            continue
        into = merged.setdefault(standard_name, {})
        for value, count in per_value.items():
            text = value if standard_name == "traits_required" else nova_value(standard_name, value)
            into[text] = into.get(text, 0) + count
    return merged
