"""Random fleets and flavors, OpenStack Placement's answer and Berth's on each (host, request).

A fleet is plain data (JSON, printed when a comparison fails): hosts, each with
Placement's inventory of each class it has (every field drawn), what its
instances use of each class, and its traits; the classic classes' allocation
ratios (one per fleet: Berth reads them from its options, where Placement has
them on each inventory); and requests, each a flavor and an image as a user
writes them.

- Placement: openstack-placement's WSGI app in this process, on SQLite in
  memory, every write through its REST API at microversion 1.39: one resource
  provider per host, its inventories, traits and one consumer holding its
  usage; the database is emptied of them before each fleet. Each request is
  translated as Nova translates a flavor and an image
  (nova.scheduler.utils.ResourceRequest): the flavor's vcpus, memory_mb and
  root_gb + ephemeral_gb, overridden by ``resources:CLASS=N``,
  ``hw:cpu_policy=dedicated`` taking the vCPUs as PCPU, classes of 0 units
  left out, ``trait:NAME=required|forbidden`` of the flavor and
  ``trait:NAME=required`` of the image; then ``GET /allocation_candidates``.
- Berth: a HostTable fed with each host's HostReport as its agent would send
  it (the classic figures with the reserve counted as used, ``inventories``,
  ``usages``, ``traits``), each checked by HostReport.from_wire as the
  scheduler does (a report it refuses leaves the host out), and a RequestSpec
  from the same flavor and image; the host passes when ResourceClassFilter,
  TraitsFilter, RamFilter, DiskFilter and CoreFilter all pass it.
"""

import functools
import json
import logging
import random
import time
import uuid

import numpy as np

MICROVERSION = "placement 1.39"
CLASSIC = ("VCPU", "MEMORY_MB", "DISK_GB")
OTHER = ("PCPU", "VGPU", "CUSTOM_FPGA")
TRAITS = ("HW_CPU_X86_AVX2", "STORAGE_DISK_SSD", "CUSTOM_GOLD", "CUSTOM_RACK_A")
#: The option holding each classic class's allocation ratio in Berth.
RATIO_OPTIONS = {"VCPU": "cpu_allocation_ratio", "MEMORY_MB": "ram_allocation_ratio",
                 "DISK_GB": "disk_allocation_ratio"}
#: Typical totals of each class, to draw from.
TOTALS = {"VCPU": [1, 4, 8, 16, 32, 64], "MEMORY_MB": [2048, 8192, 16384, 65536, 262144],
          "DISK_GB": [1, 10, 40, 100, 500, 2000], "PCPU": [1, 2, 4, 8, 16], "VGPU": [1, 2, 4, 8],
          "CUSTOM_FPGA": [1, 2, 3, 10]}


# --- the fleet -----------------------------------------------------------------------------------


def gen_fleet(seed):
    """A fleet of hosts and requests; the same seed gives the same fleet."""
    rng = random.Random(seed)
    ratios = {name: rng.choice([1.0, 1.0, 0.5, 1.25, 1.5, 4.0, 16.0]) for name in CLASSIC}
    hosts = [gen_host(rng, f"h{i}", ratios) for i in range(rng.randint(2, 6))]
    return {"seed": seed, "ratios": ratios, "hosts": hosts,
            "requests": [gen_request(rng) for _ in range(rng.randint(2, 4))]}


def gen_inventory(rng, name, ratio=None, plain=False):
    """Placement's fields of one inventory: its total, and unless ``plain`` (nothing reserved, any
    unit) each other field drawn, most of them plain still, so that a field often decides alone."""
    total = rng.choice(TOTALS[name] + [rng.randint(1, max(TOTALS[name]))])
    if ratio is None:
        ratio = 1.0 if rng.random() < 0.6 else rng.choice([0.5, 1.5, 2.0, 16.0, 0.0])
    inventory = {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total, "step_size": 1,
                 "allocation_ratio": ratio}
    if plain:
        return inventory
    if rng.random() < 0.3:
        inventory["reserved"] = rng.choice([rng.randint(0, total), total])
    if rng.random() < 0.3:
        inventory["max_unit"] = rng.choice([rng.randint(1, total), rng.randint(1, 8), total * 2])
    if rng.random() < 0.25:
        inventory["min_unit"] = rng.choice([rng.randint(1, inventory["max_unit"]), 2, 8,
                                            inventory["max_unit"] + 1])
    if rng.random() < 0.25:
        inventory["step_size"] = rng.choice([2, 3, 256, rng.randint(1, max(1, total // 2))])
    return inventory


def gen_host(rng, name, ratios):
    """A host of the classic classes and some others, one class of which (or none) has its fields
    drawn, each with some usage or none."""
    classes = list(CLASSIC) + [other for other in OTHER if rng.random() < 0.6]
    odd = rng.choice(classes + [None])
    inventories = {c: gen_inventory(rng, c, ratios.get(c), plain=c != odd) for c in classes}
    usages = {}
    for c, inv in inventories.items():
        capacity = (inv["total"] - inv["reserved"]) * inv["allocation_ratio"]
        if rng.random() < 0.4:
            used = rng.choice([rng.randint(0, max(0, int(capacity) // 2))] * 4
                              + [int(capacity), rng.randint(0, inv["total"] * 2)])
            if used:
                usages[c] = used
    return {"name": name, "inventories": inventories, "usages": usages,
            "traits": sorted(t for t in TRAITS if rng.random() < 0.5)}


def gen_request(rng):
    specs = {}
    dedicated = rng.random() < 0.25
    if dedicated:
        specs["hw:cpu_policy"] = "dedicated"
    classes = ["VGPU", "CUSTOM_FPGA", "PCPU", "DISK_GB", "MEMORY_MB", "VCPU"]
    for name in rng.sample(classes, rng.randint(0, 3)):
        if name in ("PCPU", "VCPU") and dedicated:
            continue  # both say how the vCPUs are taken: Nova and Berth refuse such a flavor
        amounts = [0, 1, 1, 2, 3, 4, 8] + ([512, 4096] if name == "MEMORY_MB" else [])
        specs[f"resources:{name}"] = str(rng.choice(amounts))
    for trait in rng.sample(TRAITS, rng.choice([0, 0, 1, 2])):
        specs[f"trait:{trait}"] = rng.choice(["required", "forbidden"])
    image = {f"trait:{t}": "required" for t in rng.sample(TRAITS, rng.choice([0, 0, 1]))
             if specs.get(f"trait:{t}") != "forbidden"}
    return {"flavor": {"vcpus": rng.choice([1, 1, 2, 4, 8, 16]),
                       "memory_mb": rng.choice([256, 512, 1024, 2048, 4096, 8192]),
                       "root_gb": rng.choice([0, 1, 1, 10, 20, 40]), "ephemeral_gb": rng.choice([0, 0, 5]),
                       "extra_specs": specs},
            "image_properties": image}


def translated(request):
    """(amounts, required traits, forbidden traits) as Nova asks Placement for a flavor and image."""
    flavor, specs = request["flavor"], request["flavor"]["extra_specs"]
    amounts = {"VCPU": flavor["vcpus"], "MEMORY_MB": flavor["memory_mb"],
               "DISK_GB": flavor["root_gb"] + flavor["ephemeral_gb"]}
    if specs.get("hw:cpu_policy") == "dedicated":
        amounts["PCPU"], amounts["VCPU"] = amounts.pop("VCPU"), 0
    for key, value in specs.items():
        if key.startswith("resources:"):
            amounts[key.split(":", 1)[1]] = int(value)
    required = {k.split(":", 1)[1] for k, v in specs.items() if k.startswith("trait:") and v == "required"}
    required |= {k.split(":", 1)[1] for k in request["image_properties"]}
    forbidden = {k.split(":", 1)[1] for k, v in specs.items() if k.startswith("trait:") and v == "forbidden"}
    return {c: n for c, n in amounts.items() if n > 0}, required, forbidden


# --- Placement -----------------------------------------------------------------------------------


class Placement:
    """openstack-placement's WSGI app on SQLite in memory, called in this process."""

    def __init__(self):
        from oslo_config import cfg
        from oslo_policy import opts as policy_opts
        from placement import conf as placement_conf
        from placement import db_api, deploy
        from placement.db.sqlalchemy import migration

        # It warns of each provider an inventory change leaves over capacity, as add_fleet does.
        logging.getLogger("placement").setLevel(logging.ERROR)
        conf = cfg.ConfigOpts()
        placement_conf.register_opts(conf)
        conf.set_default("connection", "sqlite://", "placement_database")
        conf([], project="placement", default_config_files=[])
        conf.set_override("auth_strategy", "noauth2", "api")
        policy_opts.set_defaults(conf, enforce_new_defaults=False)
        _validate_without_checking_schemas()
        db_api.configure(conf)
        # oslo.db sleeps on every connection's return to its pool, to let other green threads run:
        # a fifth of what a write costs here, where there are none.
        db_api.placement_context_manager.configure(thread_checkin=False)
        self.engine = db_api.get_placement_engine()
        migration.create_schema(self.engine)
        self.app = deploy.loadapp(conf)
        for name in OTHER + TRAITS:
            if name.startswith("CUSTOM_"):
                kind = "resource_classes" if name in OTHER else "traits"
                self.call("PUT", f"/{kind}/{name}", expect=(201, 204))

    def call(self, method, path, body=None, expect=(200,)):
        import webob

        request = webob.Request.blank(path, method=method)
        request.headers.update({"x-auth-token": "admin", "openstack-api-version": MICROVERSION,
                                "accept": "application/json"})
        if body is not None:
            request.body = json.dumps(body).encode()
            request.content_type = "application/json"
        response = request.get_response(self.app)
        if response.status_int not in expect:
            raise AssertionError(f"Placement: {method} {path} {json.dumps(body)} -> {response.status} "
                                 f"{response.text[:500]}")
        return response.json if response.body else None

    def empty(self):
        """No provider, consumer nor allocation left (the resource classes and traits stay)."""
        from placement.db.sqlalchemy import models

        with self.engine.begin() as connection:
            for table in (models.Allocation, models.Consumer, models.Inventory, models.ResourceProviderTrait,
                          models.ResourceProvider):
                connection.execute(table.__table__.delete())

    def add_fleet(self, fleet):
        """The fleet's hosts as Placement's only resource providers; {provider: host}."""
        self.empty()
        names = {}
        for h in fleet["hosts"]:
            rp = str(uuid.uuid4())
            names[rp] = h["name"]
            made = self.call("POST", "/resource_providers", {"name": h["name"], "uuid": rp})
            generation = made["generation"]
            if h["traits"]:
                generation = self.call("PUT", f"/resource_providers/{rp}/traits",
                                       {"traits": h["traits"], "resource_provider_generation": generation})[
                    "resource_provider_generation"]
            if h["usages"] and not whole_allocation(h):
                # Room for the usage first, then the inventories it need not fit (Placement lets an
                # inventory change leave its provider over capacity, and warns).
                roomy = {c: {"total": inv["total"], "max_unit": 2**31 - 1, "allocation_ratio": 1000.0}
                         for c, inv in h["inventories"].items()}
                generation = self.put_inventories(rp, roomy, generation)
                self.allocate(rp, h["usages"])
                self.put_inventories(rp, h["inventories"], generation + 1)
            else:
                self.put_inventories(rp, h["inventories"], generation)
                if h["usages"]:
                    self.allocate(rp, h["usages"])
        return names

    def allocate(self, rp, usages):
        self.call("PUT", f"/allocations/{uuid.uuid4()}", {
            "allocations": {rp: {"resources": usages}}, "project_id": "p", "user_id": "u",
            "consumer_generation": None, "consumer_type": "INSTANCE"}, expect=(204,))

    def put_inventories(self, rp, inventories, generation):
        return self.call("PUT", f"/resource_providers/{rp}/inventories",
                         {"inventories": inventories, "resource_provider_generation": generation})[
            "resource_provider_generation"]

    def candidates(self, names, request):
        """The hosts of the fleet that GET /allocation_candidates offers for ``request``."""
        amounts, required, forbidden = translated(request)
        query = "resources=" + ",".join(f"{c}:{n}" for c, n in sorted(amounts.items()))
        traits = sorted(required) + [f"!{t}" for t in sorted(forbidden)]
        if traits:
            query += "&required=" + ",".join(traits)
        found = self.call("GET", f"/allocation_candidates?{query}")
        return {names[rp] for rp in found["provider_summaries"]}


def _validate_without_checking_schemas():
    """Placement validates each request body with jsonschema.validate, which first checks that its
    own schema is a valid schema: nearly half of what a write costs here. Its bodies are still
    validated against the same schemas, as its own validator class does."""
    import types

    import jsonschema
    from placement import util

    def validate(instance, schema, format_checker=None):
        jsonschema.validators.validator_for(schema)(schema, format_checker=format_checker).validate(instance)

    util.jsonschema = types.SimpleNamespace(validate=validate, ValidationError=jsonschema.ValidationError,
                                            FormatChecker=jsonschema.FormatChecker)


def whole_allocation(h):
    """Whether Placement takes the host's usage as one allocation of its final inventories."""
    for c, used in h["usages"].items():
        inv = h["inventories"][c]
        if not (inv["min_unit"] <= used <= inv["max_unit"] and used % inv["step_size"] == 0
                and used <= capacity(inv)):
            return False
    return True


# --- Berth ---------------------------------------------------------------------------------------


FILTERS = ("ResourceClassFilter", "TraitsFilter", "RamFilter", "DiskFilter", "CoreFilter")


def host_report(h):
    """The report an agent of ``h`` sends: the classic figures with its reserve counted as used, and
    the reserve itself (reserved_host_*, the disk's in MB)."""
    inv, used = h["inventories"], h["usages"]

    def taken(c):
        return inv[c]["reserved"] + used.get(c, 0)

    return {"host": h["name"], "memory_mb": inv["MEMORY_MB"]["total"], "memory_mb_used": taken("MEMORY_MB"),
            "free_ram_mb": inv["MEMORY_MB"]["total"] - taken("MEMORY_MB"),
            "local_gb": inv["DISK_GB"]["total"], "local_gb_used": taken("DISK_GB"),
            "free_disk_gb": inv["DISK_GB"]["total"] - taken("DISK_GB"),
            "vcpus": inv["VCPU"]["total"], "vcpus_used": taken("VCPU"),
            "reserved_host_memory_mb": inv["MEMORY_MB"]["reserved"],
            "reserved_host_disk_mb": inv["DISK_GB"]["reserved"] * 1024,
            "reserved_host_cpus": inv["VCPU"]["reserved"], "instance_uuids": [],
            "running_vms": 0, "inventories": {c: dict(i) for c, i in inv.items()},
            "usages": {c: used.get(c, 0) for c in inv}, "traits": list(h["traits"])}


@functools.cache
def berth_conf():
    """Berth's options, read once (each fleet overrides the allocation ratios)."""
    from scheduler import conf as berth_conf
    from scheduler.conf import opts

    conf = berth_conf.new_conf()
    opts.register_plugin_opts(conf)
    conf([], project="berth-placement-parity", default_config_files=[])
    return conf


@functools.cache
def berth_filters():
    from scheduler.policy import filters

    return filters.all_filters()


class Berth:
    """Berth's HostTable of the fleet's reports and the filters that Placement's answer stands for."""

    def __init__(self, fleet):
        from berth_contract.host_report import HostReport
        from scheduler.policy.host_state import HostTable

        conf = berth_conf()
        for name, ratio in fleet["ratios"].items():
            conf.set_override(RATIO_OPTIONS[name], ratio, "filter_scheduler")
        self.table = HostTable()
        self.refused = {}  # host -> why HostReport.from_wire refused its report
        for h in fleet["hosts"]:
            try:
                report = HostReport.from_wire(host_report(h), h["name"])
            except Exception as exc:  # noqa: BLE001 (the scheduler drops such a report)
                self.refused[h["name"]] = str(exc)
                continue
            self.table.update_from_report(self.table.add(h["name"]), report, time.monotonic())
        catalog = berth_filters()
        self.filters = [catalog[name](conf) for name in FILTERS]

    def candidates(self, request):
        """The hosts passing every filter, host by host; the vector forms must say the same."""
        from berth_contract.request_spec import RequestSpec

        spec = RequestSpec.from_wire({"num_instances": 1, "instance_type": dict(request["flavor"]),
                                      "image": {"properties": dict(request["image_properties"])}}, {})
        table = self.table
        views = table.views()
        per_host = {v.host for v in views if all(f.host_passes(v, spec) for f in self.filters)}
        mask = np.ones(len(table), dtype=bool)
        for f in self.filters:
            if f.filter_vector is not None:
                mask &= np.broadcast_to(np.asarray(f.filter_vector(table, np.arange(len(table)), spec),
                                                   dtype=bool), (len(table),))
        vector = {v.host for v, ok in zip(views, mask, strict=True) if ok}
        if vector != per_host:
            raise AssertionError(f"Berth's vector filters pass {sorted(vector)}, "
                                 f"host by host {sorted(per_host)}")
        return per_host


# --- Placement's rule, to say which feature decides a case ---------------------------------------


def capacity(inv, reserved=True, ratio=True):
    return (inv["total"] - (inv["reserved"] if reserved else 0)) * (inv["allocation_ratio"] if ratio else 1.0)


def deciding(h, request):
    """The features that refuse ``h`` for ``request`` under Placement's documented rule
    (``class:check``, ``trait:...``), or ["fits"] when none does. A capacity refusal that the
    reserve or the allocation ratio alone makes is named for that field."""
    amounts, required, forbidden = translated(request)
    found = []
    for c, n in sorted(amounts.items()):
        inv = h["inventories"].get(c)
        kind = c if not c.startswith("CUSTOM_") else "CUSTOM"
        if inv is None:
            found.append(f"{kind}:absent")
            continue
        if n < inv["min_unit"]:
            found.append(f"{kind}:min_unit")
        if n > inv["max_unit"]:
            found.append(f"{kind}:max_unit")
        if n % inv["step_size"]:
            found.append(f"{kind}:step_size")
        used = h["usages"].get(c, 0)
        if used + n > capacity(inv):
            if used + n <= capacity(inv, reserved=False):
                found.append(f"{kind}:reserved")
            elif used + n <= capacity(inv, ratio=False) or inv["allocation_ratio"] == 0:
                found.append(f"{kind}:allocation_ratio")
            else:
                found.append(f"{kind}:capacity")
    have = set(h["traits"])
    image = {k.split(":", 1)[1] for k in request["image_properties"]}
    found += [f"trait:required{'(image)' if t in image else ''}" for t in sorted(required - have)]
    found += ["trait:forbidden" for _ in sorted(forbidden & have)]
    return found or ["fits"]
