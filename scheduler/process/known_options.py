"""Every section and option name of Berth's own programs, plugins and drivers (the commands'
included, oslo.log's not), by section: what a program checks a file's names against without
importing the services that declare them (scheduler.process.unknown_config).

Written by tools/write-known-options from the declarations: do not edit; a unit test fails while
it differs from them.
"""

SECTIONS = {
    "DEFAULT": (
        "agent-prefix", "agent_host", "agent_prefix", "agents", "connect-timeout", "connect_timeout",
        "control_exchange", "cpu_allocation_ratio", "demo", "demo-scaling", "demo_scaling",
        "disk_allocation_ratio", "driver", "host", "initial_cpu_allocation_ratio",
        "initial_disk_allocation_ratio", "initial_ram_allocation_ratio", "oslo_log_fast_paths",
        "ram_allocation_ratio", "rpc_response_timeout", "service_down_time", "state_path",
        "strict_config", "transport_url",
    ),
    "compute_agent": (
        "cpu_dedicated_set", "driver", "fake_build_time", "fake_busy_cpu_load", "fake_busy_fraction",
        "fake_cpu_arch", "fake_cpu_features", "fake_hidden_cpu_load", "fake_hypervisor_type",
        "fake_hypervisor_version", "fake_idle_cpu_load", "fake_idle_memory_fraction", "fake_load_seed",
        "fake_local_gb", "fake_memory_mb", "fake_migration_time_per_gb", "fake_move_failure_rate",
        "fake_powered_off_fraction", "fake_reservation_fraction", "fake_vcpus", "fake_vm_modes",
        "host_ip", "nodename", "report_interval", "report_min_interval", "report_on_change",
        "reserved_host_cpus", "reserved_host_disk_mb", "reserved_host_memory_mb",
        "resource_allocation_ratio", "resource_max_unit", "resource_min_unit", "resource_reserved",
        "resource_step_size", "resources", "traits",
    ),
    "database": (
        "auto_migrate", "connection", "connection_debug", "max_retries", "retry_interval",
        "sqlalchemy_fast_paths",
    ),
    "fake": (
        "build_time", "busy_cpu_load", "busy_fraction", "cpu_arch", "cpu_features", "hidden_cpu_load",
        "hypervisor_type", "hypervisor_version", "idle_cpu_load", "idle_memory_fraction", "load_seed",
        "local_gb", "memory_mb", "migration_time_per_gb", "move_failure_rate", "move_failure_step",
        "move_finish_time", "move_prepare_time", "power_time", "powered_off_fraction",
        "reservation_fraction", "vcpus", "vm_modes",
    ),
    "filter_scheduler": (
        "aggregate_image_properties_isolation_namespace",
        "aggregate_image_properties_isolation_separator", "available_filters",
        "balanced_cpu_allocated_weight", "balanced_cpu_used_weight", "balanced_cpu_util_threshold",
        "balanced_dominant_weight", "balanced_expected_vms_per_host",
        "balanced_memory_allocated_weight", "balanced_memory_used_weight",
        "balanced_memory_util_threshold", "balanced_recent_starts_weight", "balanced_recent_window",
        "balanced_selection_spread", "balanced_vm_count_weight", "balanced_weight_multiplier",
        "build_failure_weight_multiplier", "capacity_cpu_burst_ratio", "capacity_cpu_headroom",
        "capacity_current_score_weight", "capacity_future_deploy_ratio",
        "capacity_headroom_after_placement", "capacity_memory_burst_ratio", "capacity_memory_headroom",
        "capacity_storage_headroom", "capacity_weight_multiplier", "cpu_allocation_ratio",
        "cpu_weight_multiplier", "default_availability_zone", "disk_allocation_ratio",
        "disk_red_threshold", "disk_weight_multiplier", "disk_yellow_threshold", "enabled_filters",
        "host_subset_size", "hypervisor_version_weight_multiplier",
        "image_properties_default_architecture", "image_props_weight_multiplier",
        "image_props_weight_setting", "initial_cpu_allocation_ratio", "initial_disk_allocation_ratio",
        "initial_ram_allocation_ratio", "io_ops_weight_multiplier", "isolated_hosts", "isolated_images",
        "load_half_life", "load_stale_after", "max_instances_per_host", "max_io_ops_per_host",
        "num_instances_weight_multiplier", "ram_allocation_ratio", "ram_weight_multiplier",
        "restrict_isolated_hosts_to_isolated_images", "shuffle_best_same_weighed_hosts",
        "soft_affinity_weight_multiplier", "soft_anti_affinity_weight_multiplier", "weighers",
        "weight_classes",
    ),
    "jobs": (
        "interval", "lease_time",
    ),
    "metrics": (
        "required", "weight_multiplier", "weight_of_unavailable", "weight_setting",
    ),
    "oslo_messaging_rabbit": (
        "amqp_auto_delete", "amqp_durable_queues", "amqp_fast_paths", "dead_letter_max_bytes",
        "dead_letter_max_length", "delivery_limit", "heartbeat_timeout_threshold",
        "kombu_failover_strategy", "max_message_bytes", "polling_interval", "publish_retries",
        "rabbit_interval_max", "rabbit_qos_prefetch_count", "rabbit_quorum_queue",
        "rabbit_retry_backoff", "rabbit_retry_interval", "rabbit_transient_queues_ttl", "ssl",
        "ssl_ca_file", "ssl_cert_file", "ssl_key_file",
    ),
    "prometheus": (
        "allowed_hosts", "enabled", "listen_address", "listen_port", "per_host_series", "read_timeout",
        "status_page",
    ),
    "qemu": (
        "accel", "binary", "boot_timeout", "cpu_model", "default_image", "images_path",
        "instances_path", "kvm_probe_timeout", "live_migration_bandwidth", "local_gb", "memory_mb",
        "migration_port_max", "migration_port_min", "stop_timeout", "vcpus",
    ),
    "roles": (
        "agents", "enforce", "operators", "require_agent_auth", "schedulers",
    ),
    "scaling": (
        "cast_grace", "cpu_initialization_period", "enabled", "initial_readiness_delay", "max_members",
        "max_new_members_per_sync", "max_pushed_metrics", "metric_max_age", "replace_backoff",
        "replace_backoff_max", "sync_period",
    ),
    "scheduler": (
        "agent_users", "batch_size", "build_retries_same_host", "build_timeout",
        "fragmentation_hint_time_limit", "max_attempts", "move_timeout", "periodic_interval",
        "prefer_owned_hosts", "report_digest_interval", "report_digest_size", "report_ingestion",
        "require_agent_auth", "resize_confirm_window", "resize_in_place", "service_down_time",
    ),
    "upgrade_levels": (
        "admin", "compute", "scaling", "scheduler",
    ),
}
