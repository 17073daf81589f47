"""The qemu driver: real guests, one qemu process each, driven over QMP."""

from compute_agent.driver.qemu.driver import QemuDriver, list_opts, register_opts

__all__ = ["QemuDriver", "list_opts", "register_opts"]
