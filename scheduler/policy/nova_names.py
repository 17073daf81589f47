"""Nova's names for filters and weighers, as a nova.conf writes them, in Berth's terms.

``nova.scheduler.filters.all_filters`` and ``nova.scheduler.weights.all_weighers``
stand for Nova's catalog; a dotted path ``nova.scheduler.weights.ram.RAMWeigher``
for the class it ends with. A plugin of Nova's that Berth does not have is
refused with what to do instead, so that a nova.conf never starts a scheduler
that places differently from what it says.
"""

ALL_FILTERS = "nova.scheduler.filters.all_filters"
ALL_WEIGHERS = "nova.scheduler.weights.all_weighers"

#: Nova's weighers (nova.scheduler.weights.all_weighers) that Berth has.
NOVA_WEIGHERS = (
    "RAMWeigher", "DiskWeigher", "CPUWeigher", "IoOpsWeigher", "MetricsWeigher",
    "ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher", "BuildFailureWeigher",
    "HypervisorVersionWeigher", "NumInstancesWeigher", "ImagePropertiesWeigher",
)
#: Nova's weighers left out of all_weighers here: each weighs every host alike in a Berth cloud.
SILENT_IN_BERTH = {
    "PCIWeigher": "Berth has no PCI devices",
    "CrossCellWeigher": "Berth has no cells",
}
#: Nova's plugins Berth does not have, and why; naming one stops the scheduler at start.
MISSING = {
    "NUMATopologyFilter": "Berth has no NUMA topology: leave it out",
    "PciPassthroughFilter": "Berth has no PCI devices: leave it out",
    "PCIWeigher": "Berth has no PCI devices: leave it out",
    "CrossCellWeigher": "Berth has no cells: leave it out",
    "TypeAffinityFilter": "Nova removed it; use AggregateTypeAffinityFilter",
}


def translate(names, available, kind):
    """Berth's class names for ``names`` as a nova.conf or Berth's own config gives them.

    Raises ValueError naming a Nova plugin Berth does not have."""
    translated = []
    for name in names:
        if name == ALL_FILTERS and kind == "filter":
            translated.extend(sorted(available))
            continue
        if name == ALL_WEIGHERS and kind == "weigher":
            translated.extend(n for n in NOVA_WEIGHERS if n in available)
            continue
        short = name.rsplit(".", 1)[-1] if name.startswith("nova.") else name
        if short not in available and MISSING.get(short):
            raise ValueError(f"{kind} {name}: {MISSING[short]}")
        translated.append(short)
    return list(dict.fromkeys(translated))
