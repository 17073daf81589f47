"""No extra spec is ever ignored: who reads each key of a flavor's extra specs and of an image's
properties.

Every key a request carries must be one of:

- read by an enabled filter (a filter names the keys it reads in ``reads_extra_specs`` and
  ``reads_image_properties``: exact keys, ``scope:`` for every key of a scope, ``""`` for the
  unscoped extra specs, ``*`` for every image property);
- counted as a resource (``resources:CLASS``, ``hw:cpu_policy``; a class other than the classic
  VCPU, MEMORY_MB and DISK_GB needs a filter that reads ``resources:`` enabled);
- the hypervisor's business: applied by the agent's driver when it builds the instance, with
  nothing for the scheduler to choose (scheduler.policy.hypervisor_keys, Nova's names: a key of
  those namespaces that is not one of them is refused, with the name it most likely misspells);
- or else the request is refused, naming the key and the filter that would read it, if one is
  installed. Keys Berth knows but cannot honour (:func:`unsupported`) are refused with the reason.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from berth_contract import image_meta, resource_classes, traits
from berth_contract.request_spec import IMAGE_CPU_POLICY, Flavor, RequestSpec
from scheduler.exception import InvalidRequest
from scheduler.policy import hypervisor_keys
from scheduler.policy.filters import BaseHostFilter

#: Extra specs Berth knows and does not honour: {key or scope: why}.
_UNSUPPORTED = {
    "group_policy": resource_classes.NUMBERED,
    "hw:cpu_dedicated_mask": "mixed CPU policies need guest NUMA cells, which Berth does not model",
    "hw:pmem": "persistent memory namespaces are not tracked",
    "hw:mem_encryption": "not turned into a resource: ask for resources:MEM_ENCRYPTION_CONTEXT=1 "
                         "and the CPU's trait instead",
    "hw:emulator_threads_policy": "an isolated emulator thread takes a dedicated CPU Berth does not "
                                  "count: ask for one more with resources:PCPU",
    "pci_passthrough:": "PCI devices are not tracked: give them a custom resource class on the "
                        "agents ([compute_agent] resources) and ask for resources:CUSTOM_...",
    "accel:": "no accelerator service: give the devices a custom resource class and ask for "
              "resources:CUSTOM_...",
}
_UNSUPPORTED_IMAGE = {
    "hw_mem_encryption": _UNSUPPORTED["hw:mem_encryption"],
    "hw_emulator_threads_policy": _UNSUPPORTED["hw:emulator_threads_policy"],
    "hw_pmem": _UNSUPPORTED["hw:pmem"],
}
_ENABLE = "[filter_scheduler] enabled_filters"


def _scope(key: str) -> str:
    return key.split(":", 1)[0] + ":" if ":" in key else ""


def _reads(entries: Iterable[str], key: str) -> bool:
    scope = _scope(key)
    return any(entry == key or entry == "*" or (entry == scope and (scope or ":" not in key))
               for entry in entries)


def readers(plugins: Iterable, key: str, image: bool = False, everything: bool = True,
            unscoped: bool = True) -> list[str]:
    """The names of the filters of ``plugins`` (instances or classes) that read ``key``.
    ``everything``: count the filters that read every image property; ``unscoped``: those that
    read every unscoped extra spec."""
    found = []
    for plugin in plugins:
        if image and everything and hasattr(plugin, "reads_image_property") and not isinstance(plugin, type):
            reads = plugin.reads_image_property(key)
        else:
            entries = getattr(plugin, "reads_image_properties" if image else "reads_extra_specs", ())
            reads = _reads([e for e in entries if (everything or e != "*") and (unscoped or e != "")], key)
        if reads:
            found.append(plugin.__name__ if isinstance(plugin, type) else plugin.name)
    return found


def unsupported(key: str, image: bool = False) -> str | None:
    """Why Berth does not honour ``key``, or None."""
    table = _UNSUPPORTED_IMAGE if image else _UNSUPPORTED
    return table.get(key) or table.get(_scope(key) or key)


def hypervisors(key: str, image: bool = False) -> bool:
    """Whether ``key`` is the driver's business, with nothing for the scheduler to choose."""
    return hypervisor_keys.known(key, image) or (image and key in image_meta.LEGACY_NAMES)


def _counted(key: str, image: bool) -> bool:
    """Whether ``key`` changes only what the instance takes of the classic classes, which are
    counted whatever the filters (the other classes it asks for are checked by unread_flavor)."""
    if image:
        return key == IMAGE_CPU_POLICY  # checked against the flavor's (RequestSpec)
    if key.startswith(resource_classes.RESOURCES):
        return key[len(resource_classes.RESOURCES):] in resource_classes.CLASSIC
    return key == resource_classes.CPU_POLICY


#: Scopes read only by a filter naming them, never by one reading every image property.
_OWN_READERS = (traits.TRAIT, resource_classes.RESOURCES)


def _why(key: str, image: bool, enabled: list, installed: dict) -> str | None:
    what = f"image property {key}" if image else f"extra spec {key}"
    why = unsupported(key, image)
    if why:
        return f"{what} is not supported: {why}"
    if _counted(key, image):
        return None
    if readers(enabled, key, image, everything=not key.startswith(_OWN_READERS)):
        return None
    # A key a filter names is that filter's, even in the hypervisor's namespaces (hw_architecture).
    candidates = readers(installed.values(), key, image, everything=False, unscoped=False)
    if not candidates and hypervisors(key, image):
        return None
    candidates = candidates or readers(installed.values(), key, image, everything=False)
    if candidates:
        return (f"{what} is read by {' or '.join(candidates)}, which is not enabled: add it to "
                f"{_ENABLE}, or leave the key out")
    if hypervisor_keys.namespaced(key, image):
        counted = IMAGE_CPU_POLICY if image else resource_classes.CPU_POLICY
        near = hypervisor_keys.nearest(key, image, _filter_keys(installed, image) | {counted})
        return (f"{what} is no key Berth or the hypervisor knows"
                + (f": did you mean {near}?" if near else "; leave it out (user guide: Flavors and images)"))
    return (f"{what}: no enabled filter reads it, it is not a resource, and it is not a key Berth "
            "leaves to the hypervisor: leave it out (user guide: Flavors and images)")


def _filter_keys(installed: dict, image: bool) -> frozenset:
    """The exact keys the ``installed`` filters name."""
    field = "reads_image_properties" if image else "reads_extra_specs"
    return frozenset(entry for cls in installed.values() for entry in getattr(cls, field, ())
                     if entry and not entry.endswith((":", "*")))


def unread(spec: RequestSpec, enabled: Iterable, installed: dict[str, type[BaseHostFilter]]) -> str | None:
    """Why ``spec`` asks for something the ``enabled`` filters would not honour, or None.
    ``installed``: {name: class} of every filter installed, to name the one to enable."""
    try:
        spec.check_traits_and_policy()
    except InvalidRequest as exc:
        return str(exc)
    return unread_flavor(spec.flavor, enabled, installed, spec.image_properties)


def unread_flavor(flavor: Flavor, enabled: Iterable, installed: dict[str, type[BaseHostFilter]],
                  image_properties: dict | None = None) -> str | None:
    """Why ``flavor`` (and ``image_properties``) asks for something the ``enabled`` filters would
    not honour, or None: what a request of that flavor would be refused for."""
    enabled = [p for p in enabled if isinstance(p, BaseHostFilter)]
    for image, keys in ((False, flavor.extra_specs), (True, image_properties or {})):
        for key in keys:
            why = _why(key, image, enabled, installed)
            if why:
                return why
    for name in flavor.amounts:
        if name in resource_classes.CLASSIC or readers(enabled, resource_classes.RESOURCES + name):
            continue
        candidates = readers(installed.values(), resource_classes.RESOURCES + name, everything=False)
        return (f"the flavor asks for {name}, which is counted by "
                f"{' or '.join(candidates) or 'no installed filter'}"
                + (f", not enabled: add it to {_ENABLE}" if candidates else ""))
    return None
