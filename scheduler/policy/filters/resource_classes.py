"""ResourceClassFilter: the host has room for every resource class the flavor asks for beyond
VCPU, MEMORY_MB and DISK_GB (PCPU, VGPU, CUSTOM_*...), as Placement checks an allocation.

Each class is checked against the host's inventory of it as Placement does
(Inventory.refuses): at least ``min_unit``, at most ``max_unit``, a multiple of
``step_size``, and no more than its capacity less what is used. A host that
reports no inventory of the class has none of it. An inventory that holds
nothing (``min_unit`` above ``max_unit``, an ``allocation_ratio`` of 0...),
which Placement accepts, refuses only the requests for its class: when no host
is left, the reason names the class, the hosts and why. The agent claims
against its own inventory, so this filter sends no limits.
"""

import numpy as np

from berth_contract.resource_classes import CLASSIC, RESOURCES
from scheduler.policy import filters

#: How many hosts the reason names, for each class whose inventory holds nothing there.
NAMED_HOSTS = 3


def asked(spec):
    """{class: units} the flavor asks for beyond the classic three."""
    return {name: units for name, units in spec.flavor.amounts.items() if name not in CLASSIC}


class ResourceClassFilter(filters.BaseHostFilter):
    reads_extra_specs = (RESOURCES,)

    def host_passes(self, host_state, spec):
        inventories = host_state.inventories
        for name, units in asked(spec).items():
            inventory = inventories.get(name)
            if inventory is None or inventory.refuses(host_state.used(name), units) is not None:
                return False
        return True

    def filter_vector(self, table, rows, spec):
        wanted = asked(spec)
        if not wanted:
            return True
        passed = True
        for name, units in wanted.items():
            columns = table.resource(name)
            if columns is None:
                return False
            passed = passed & columns.fits(len(table), rows, units)
        return passed

    def why_removed(self, table, rows, spec):
        """The classes asked for whose inventory holds nothing on some of ``rows``: on which
        hosts, and why."""
        notes = []
        for name in asked(spec):
            if table.resource(name) is None:
                notes.append(f"no host has an inventory of {name}")
                continue
            found = []
            # Only the hosts that report inventories beyond the classic three can have one of it.
            reporting = np.fromiter((row for row, extra in table.extra.items() if "inventories" in extra),
                                    dtype=np.intp)
            said = {}  # hosts alike share one Inventory (HostTable._inventory): asked once each
            for row in rows[np.isin(rows, reporting)].tolist():
                inventory = table.extra[row]["inventories"].get(name)
                if inventory is None:
                    continue
                why = said.get(id(inventory), said)
                if why is said:
                    why = said[id(inventory)] = inventory.holds_nothing
                if why is not None:
                    found.append((table.names[row], why))
            if found:
                named = "; ".join(f"{host}: {why}" for host, why in found[:NAMED_HOSTS])
                more = f"; and {len(found) - NAMED_HOSTS} more" if len(found) > NAMED_HOSTS else ""
                notes.append(f"the inventory of {name} holds nothing on {len(found)} "
                             f"host{'s' if len(found) != 1 else ''}, {named}{more}")
        return "; ".join(notes) or None
