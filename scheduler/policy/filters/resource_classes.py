"""ResourceClassFilter: the host has room for every resource class the flavor asks for beyond
VCPU, MEMORY_MB and DISK_GB (PCPU, VGPU, CUSTOM_*...), as Placement checks an allocation.

Each class is checked against the host's inventory of it as Placement does
(Inventory.refuses): at least ``min_unit``, at most ``max_unit``, a multiple of
``step_size``, and no more than its capacity less what is used. A host that
reports no inventory of the class has none of it. The agent claims against its
own inventory, so this filter sends no limits.
"""

from berth_contract.resource_classes import CLASSIC, RESOURCES
from scheduler.policy import filters


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
