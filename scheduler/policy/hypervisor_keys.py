"""The flavor extra specs and image properties that are the hypervisor's business: the agent's
driver applies them when it builds the instance, and the scheduler has nothing to choose by
them. Nova's names, as its API accepts them; a key in one of these namespaces that is not
listed here is a typo (``hw:cpu_polcy``), refused with the nearest known name. Pure data.
"""

import difflib
import re

#: Flavor extra specs (guest CPU topology, NUMA cells, huge pages, devices, quotas...).
FLAVOR = frozenset({
    "hide_hypervisor_id", "hw:boot_menu", "hw:cpu_cores", "hw:cpu_max_cores", "hw:cpu_max_sockets",
    "hw:cpu_max_threads", "hw:cpu_realtime", "hw:cpu_realtime_mask", "hw:cpu_sockets",
    "hw:cpu_thread_policy", "hw:cpu_threads", "hw:ephemeral_encryption", "hw:ephemeral_encryption_format",
    "hw:hide_hypervisor_id", "hw:locked_memory", "hw:mem_encryption_model", "hw:mem_page_size",
    "hw:numa_nodes", "hw:pci_numa_affinity_policy", "hw:pmu", "hw:redirected_usb_ports",
    "hw:serial_port_count", "hw:sound_model", "hw:tpm_model", "hw:tpm_secret_security", "hw:tpm_version",
    "hw:usb_model", "hw:vif_multiqueue_enabled", "hw:viommu_model", "hw:virtio_packed_ring",
    "hw:watchdog_action", "hw_rng:allowed", "hw_rng:rate_bytes", "hw_rng:rate_period",
    "hw_video:ram_max_mb", "os:secure_boot",
    "quota:cpu_limit", "quota:cpu_period", "quota:cpu_quota", "quota:cpu_reservation", "quota:cpu_shares",
    "quota:cpu_shares_level", "quota:cpu_shares_share", "quota:disk_io_limit", "quota:disk_io_reservation",
    "quota:disk_io_shares_level", "quota:disk_io_shares_share", "quota:disk_read_bytes_sec",
    "quota:disk_read_iops_sec", "quota:disk_total_bytes_sec", "quota:disk_total_iops_sec",
    "quota:disk_write_bytes_sec", "quota:disk_write_iops_sec", "quota:memory_limit",
    "quota:memory_reservation", "quota:memory_shares_level", "quota:memory_shares_share",
    "quota:vif_inbound_average", "quota:vif_inbound_burst", "quota:vif_inbound_peak", "quota:vif_limit",
    "quota:vif_outbound_average", "quota:vif_outbound_burst", "quota:vif_outbound_peak",
    "quota:vif_reservation", "quota:vif_shares_level", "quota:vif_shares_share",
    "vmware:hw_version", "vmware:storage_policy",
})
FLAVOR_NUMBERED = re.compile(r"^hw:numa_(cpus|mem)\.\d{1,3}$")
#: The scopes of FLAVOR: a key of one of them not listed is refused as unknown.
FLAVOR_SCOPES = ("hw:", "hw_rng:", "hw_video:", "os:", "quota:", "vmware:")

#: Image properties (Nova's image metadata: ``hw_`` the guest's hardware, ``img_`` the image's
#: handling on the host, ``os_`` the guest OS).
IMAGE = frozenset({
    "hw_auto_disk_config", "hw_boot_menu", "hw_cdrom_bus", "hw_cpu_cores", "hw_cpu_max_cores",
    "hw_cpu_max_sockets", "hw_cpu_max_threads", "hw_cpu_realtime_mask", "hw_cpu_sockets",
    "hw_cpu_thread_policy", "hw_cpu_threads", "hw_device_id", "hw_disk_bus", "hw_disk_type",
    "hw_emulation_architecture", "hw_ephemeral_encryption", "hw_ephemeral_encryption_format",
    "hw_ephemeral_encryption_secret_uuid", "hw_firmware_stateless", "hw_firmware_type", "hw_floppy_bus",
    "hw_input_bus", "hw_ipxe_boot", "hw_locked_memory", "hw_machine_type", "hw_maxphysaddr_mode",
    "hw_mem_encryption_model", "hw_mem_page_size", "hw_numa_nodes", "hw_pci_numa_affinity_policy",
    "hw_pmu", "hw_pointer_model", "hw_qemu_guest_agent", "hw_redirected_usb_ports", "hw_rescue_bus",
    "hw_rescue_device", "hw_rng_model", "hw_scsi_model", "hw_serial_port_count", "hw_sound_model",
    "hw_time_hpet", "hw_tpm_model", "hw_tpm_version", "hw_usb_model", "hw_video_model", "hw_video_ram",
    "hw_vif_model", "hw_vif_multiqueue_enabled", "hw_viommu_model", "hw_virtio_packed_ring",
    "hw_watchdog_action", "img_bdm_v2", "img_bittorrent", "img_block_device_mapping",
    "img_cache_in_nova", "img_compression_level", "img_config_drive", "img_hide_hypervisor_id",
    "img_linked_clone", "img_mappings", "img_owner_id", "img_root_device_name", "img_signature",
    "img_signature_certificate_uuid", "img_signature_hash_method", "img_signature_key_type",
    "img_use_agent", "img_version", "os_admin_user", "os_command_line", "os_distro",
    "os_require_quiesce", "os_secure_boot", "os_skip_agent_inject_files_at_boot",
    "os_skip_agent_inject_ssh", "os_type",
    # Glance's own bookkeeping, which an image carries and nothing in Nova reads.
    "os_hash_algo", "os_hash_value", "os_hidden",
    # A legacy name Nova reads as hw_disk_bus and hw_scsi_model (the other legacy names are
    # berth_contract.image_meta's).
    "vmware_adaptertype",
})
IMAGE_NUMBERED = re.compile(
    r"^(hw_numa_(cpus|mem)\.\d{1,3}|os_glance_[a-z0-9_]+|owner_specified\.openstack\.[a-z0-9_]+)$")
#: The prefixes of IMAGE: a property starting with one of them not listed is refused as unknown.
IMAGE_PREFIXES = ("hw_", "img_", "os_")


def known(key: str, image: bool) -> bool:
    if image:
        return key in IMAGE or bool(IMAGE_NUMBERED.match(key))
    return key in FLAVOR or bool(FLAVOR_NUMBERED.match(key))


def namespaced(key: str, image: bool) -> bool:
    """Whether ``key`` is in one of the hypervisor's namespaces (known there or not)."""
    return key.startswith(IMAGE_PREFIXES if image else FLAVOR_SCOPES)


def nearest(key: str, image: bool, more: frozenset = frozenset()) -> str | None:
    """The known key ``key`` most likely misspells, or None."""
    found = difflib.get_close_matches(key, sorted((IMAGE if image else FLAVOR) | more), n=1, cutoff=0.8)
    return found[0] if found else None
