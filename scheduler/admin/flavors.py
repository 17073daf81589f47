"""The scheduler's RPC endpoint for flavors: named sizes and extra specs, kept in the database.

Registered beside the AdminEndpoint (the admin API, 1.1 on); every public method is an RPC
method (the ``berth flavor ...`` commands, and ``berth server create --flavor NAME`` and ``berth server resize
--flavor NAME``, which look a flavor up and send it whole in their request). Anyone who may
boot may read them; only operators change them. A flavor is checked as a request's flavor is
(berth_contract.request_spec.Flavor.from_wire) before anything is saved, and every refusal
is an InvalidRequest whose message says what is wrong. Changing a flavor changes no instance:
each keeps the flavor it was booted or resized with, as in Nova.
"""

import logging

from berth_contract.request_spec import Flavor, display_name
from scheduler import api_versions, rpc
from scheduler.admin.grouping import _refused
from scheduler.db.api import Conflict, NotFound
from scheduler.db.flavors import SIZES
from scheduler.exception import InvalidRequest
from scheduler.policy import extra_specs, filters

LOG = logging.getLogger(__name__)
MAX_TEXT = 255
MAX_PROPERTIES = 100


def flavor_name(value):
    return display_name(value, "flavor name")


def check_properties(properties, where="properties", empty=False):
    """``{key: value}``, both strings of at most MAX_TEXT characters (as Nova's extra specs)."""
    if not isinstance(properties, dict) or (not properties and not empty) or len(properties) > MAX_PROPERTIES:
        raise InvalidRequest(f"{where}: give {'0' if empty else '1'} to {MAX_PROPERTIES} key=value pairs")
    for key, value in properties.items():
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_TEXT:
            raise InvalidRequest(f"{where}: key {str(key)[:60]!r} must be a non-empty string of at most "
                                 f"{MAX_TEXT} characters")
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise InvalidRequest(f"{where}[{key}]: the value must be a string of at most {MAX_TEXT} "
                                 f"characters, got {str(value)[:60]!r}")
    return dict(properties)


def checked_flavor(values):
    """The flavor ``values`` make ({name, memory_mb, root_gb, ephemeral_gb, vcpus, extra_specs}),
    checked as a request's: InvalidRequest naming the field."""
    if not isinstance(values, dict):
        raise InvalidRequest("flavor: must be an object")
    unknown = sorted(set(values) - {"name", "extra_specs", *SIZES})
    if unknown:
        raise InvalidRequest(f"flavor: unknown field(s) {', '.join(map(str, unknown))}")
    name = flavor_name(values.get("name"))
    specs = check_properties(values.get("extra_specs") or {}, "flavor.extra_specs", empty=True)
    return Flavor.from_wire(dict(values, name=name, extra_specs=specs), "flavor").to_wire()


class FlavorEndpoint:
    RPC_API = api_versions.ADMIN

    def __init__(self, database, conf=None):
        self._db = database
        # None: no filter check (a flavor's syntax is checked all the same).
        self._filters = None if conf is None else filters.enabled_filters(conf)

    def _honoured(self, flavor):
        """Refuse a flavor whose requests every scheduler would refuse: an extra spec no enabled
        filter reads, no resource and not the hypervisor's business (scheduler.policy.extra_specs)."""
        if self._filters is None:
            return
        why = extra_specs.unread_flavor(Flavor.from_wire(flavor, "flavor"), self._filters,
                                        filters.all_filters())
        if why is not None:
            raise InvalidRequest(f"flavor {flavor['name']}: {why}")

    @rpc.read_only
    @rpc.callers(rpc.CLIENT)
    def list_flavors(self, context):
        return self._db.list_flavors()

    @rpc.read_only
    @rpc.callers(rpc.CLIENT)
    def show_flavor(self, context, name):
        with _refused(NotFound):
            return self._db.get_flavor(flavor_name(name))

    @rpc.callers(rpc.OPERATOR)
    def create_flavor(self, context, flavor):
        checked = checked_flavor(flavor)
        self._honoured(checked)
        with _refused(Conflict):
            created = self._db.create_flavor(checked)
        LOG.info("Created flavor %s: %d MB, %d+%d GB, %d vCPUs%s", created["name"], created["memory_mb"],
                 created["root_gb"], created["ephemeral_gb"], created["vcpus"],
                 f", {len(created['extra_specs'])} extra spec(s)" if created["extra_specs"] else "")
        return created

    @rpc.callers(rpc.OPERATOR)
    def set_flavor_properties(self, context, name, properties):
        name = flavor_name(name)
        properties = check_properties(properties)
        with _refused(NotFound):
            current = self._db.get_flavor(name)
        # The flavor as it would be, checked whole: a spec may be wrong only beside the others.
        self._honoured(checked_flavor(dict(_sizes(current), name=name,
                                           extra_specs={**current["extra_specs"], **properties})))
        with _refused(NotFound):
            changed = self._db.update_flavor_extra_specs(name, properties)
        LOG.info("Set properties of flavor %s: %s", name,
                 ", ".join(f"{k}={v}" for k, v in sorted(properties.items())))
        return changed

    @rpc.callers(rpc.OPERATOR)
    def unset_flavor_properties(self, context, name, keys):
        name = flavor_name(name)
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
            raise InvalidRequest("keys: give one or more property names")
        with _refused(NotFound):
            changed = self._db.update_flavor_extra_specs(name, unset=list(dict.fromkeys(keys)))
        LOG.info("Unset properties of flavor %s: %s", name, ", ".join(keys))
        return changed

    @rpc.callers(rpc.OPERATOR)
    def delete_flavor(self, context, name):
        """Delete a flavor; the instances booted with it keep its sizes (their own copy)."""
        name = flavor_name(name)
        with _refused(NotFound):
            self._db.delete_flavor(name)
        LOG.info("Deleted flavor %s", name)


def _sizes(flavor):
    return {key: flavor[key] for key in SIZES}
