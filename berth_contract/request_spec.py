"""What a placement request asks for, read and checked from its wire form.

``RequestSpec.from_wire`` is the only way a request enters the policy layer:
it checks every field it reads and raises InvalidRequest naming the field,
so that filters and weighers can trust what they are given.
"""

import dataclasses
import re
import uuid as uuidlib

from berth_contract import amqp_names as names
from berth_contract import host_names, resource_classes, traits
from berth_contract.errors import InvalidRequest
from berth_contract.json_checks import integer, json_object, sized_list
from berth_contract.wire_numbers import is_finite

MAX_INSTANCES_PER_REQUEST = 1000
# 16 TiB of RAM, 1 PiB of disk, 4096 vCPUs: beyond any host, so surely a typo.
MAX_MEMORY_MB = 16 * 1024 * 1024
MAX_DISK_GB = 1024 * 1024
MAX_VCPUS = 4096
MAX_LIST = 1000
MAX_TEXT = 255
#: The image property of the CPU policy (the flavor's hw:cpu_policy, which Berth takes).
IMAGE_CPU_POLICY = "hw_cpu_policy"
#: A UUID as str(uuid.UUID(...)) writes it.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_bounded_number(value, high):
    """A finite int or float (not a bool) between 0 and ``high``."""
    return is_finite(value) and 0 <= value <= high


def _text(value, where, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise InvalidRequest(f"{where}: must be a non-empty string of at most {MAX_TEXT} characters")
    if names.CONTROL.search(value):
        # A NUL, for one, is refused by PostgreSQL in any text column.
        raise InvalidRequest(f"{where}: must not hold control characters, got {value[:60]!r}")
    return value


def display_name(value, where, optional=False):
    """A name as Nova takes it: printable text, not starting or ending with whitespace."""
    value = _text(value, where, optional)
    if value is not None and (not value.isprintable() or value != value.strip()):
        raise InvalidRequest(f"{where}: must be printable text that does not start or end with a space, "
                             f"got {value[:60]!r}")
    return value


def instance_names(template, count):
    """The names of the ``count`` instances of a request named ``template``: each ``%d`` in it
    becomes the instance's index from 1; without one, several instances are named as Nova
    names them, ``template-1``, ``template-2``...; a single one ``template`` itself."""
    if template is None:
        return [None] * count
    if "%d" in template:
        return [template.replace("%d", str(index)) for index in range(1, count + 1)]
    if count == 1:
        return [template]
    return [f"{template}-{index}" for index in range(1, count + 1)]


def check_display_names(template, count, where):
    """:func:`instance_names` of a ``template`` that :func:`display_name` accepts, each name
    no longer than a name may be."""
    names = instance_names(display_name(template, where, optional=True), count)
    for name in names:
        if name is not None and len(name) > MAX_TEXT:
            raise InvalidRequest(f"{where}: {name[:60]!r}... is longer than {MAX_TEXT} characters")
    return names


def _str_list(value, where):
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    sized_list(value, f"{where}:", 0, MAX_LIST, "strings")
    return [_text(item, f"{where}[{i}]") for i, item in enumerate(value)]


def parse_uuid(value, where):
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return value  # what str(UUID(value)) gives, without building the UUID
    try:
        return str(uuidlib.UUID(value))
    except (TypeError, ValueError, AttributeError):
        raise InvalidRequest(f"{where}: must be a UUID, got {value!r}") from None


def _string_map(value, where):
    value = json_object(value, f"{where}:")
    if len(value) > MAX_LIST:
        raise InvalidRequest(f"{where}: at most {MAX_LIST} entries")
    for key, item in value.items():
        _text(key, f"{where} key")
        if not isinstance(item, str | int | float | bool | list) or (
                isinstance(item, int | float) and not isinstance(item, bool) and not is_finite(item)):
            raise InvalidRequest(f"{where}[{key}]: must be a string, finite number or list")
    return dict(value)


@dataclasses.dataclass(frozen=True)
class Flavor:
    memory_mb: int
    root_gb: int
    ephemeral_gb: int
    vcpus: int
    name: str | None = None
    extra_specs: dict = dataclasses.field(default_factory=dict)

    #: {resource class: units} the instance takes of its host (berth_contract.resource_classes):
    #: VCPU, MEMORY_MB and DISK_GB always, and whatever its extra specs ask for.
    amounts: dict = dataclasses.field(init=False, repr=False, compare=False)
    #: The traits its extra specs require and forbid (berth_contract.traits).
    required_traits: frozenset = dataclasses.field(init=False, repr=False, compare=False)
    forbidden_traits: frozenset = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        where = f"flavor {self.name}: extra_specs" if self.name else "flavor.extra_specs"
        object.__setattr__(self, "amounts", resource_classes.amounts(
            self.vcpus, self.memory_mb, self.disk_gb, self.extra_specs, where))
        required, forbidden = traits.of_flavor(self.extra_specs, where)
        both = required & forbidden
        if both:
            raise InvalidRequest(f"{where}: trait {sorted(both)[0]} is both required and forbidden")
        object.__setattr__(self, "required_traits", required)
        object.__setattr__(self, "forbidden_traits", forbidden)

    @property
    def disk_gb(self):
        return self.root_gb + self.ephemeral_gb

    @classmethod
    def from_wire(cls, value, where="request_spec.instance_type"):
        value = json_object(value, f"{where}:")
        return cls(
            memory_mb=integer(value.get("memory_mb"), f"{where}.memory_mb:", 1, MAX_MEMORY_MB),
            root_gb=integer(value.get("root_gb", 0), f"{where}.root_gb:", 0, MAX_DISK_GB),
            ephemeral_gb=integer(value.get("ephemeral_gb", 0), f"{where}.ephemeral_gb:", 0, MAX_DISK_GB),
            vcpus=integer(value.get("vcpus"), f"{where}.vcpus:", 1, MAX_VCPUS),
            name=_text(value.get("name"), f"{where}.name", optional=True),
            extra_specs=_string_map(value.get("extra_specs"), f"{where}.extra_specs"),
        )

    def to_wire(self):
        return {"memory_mb": self.memory_mb, "root_gb": self.root_gb, "ephemeral_gb": self.ephemeral_gb,
                "vcpus": self.vcpus, "name": self.name, "extra_specs": dict(self.extra_specs)}


@dataclasses.dataclass
class Retry:
    num_attempts: int = 0
    hosts: list = dataclasses.field(default_factory=list)  # [[host, node], ...]
    exc_reason: str | None = None
    #: The last attempt's host went silent (build_timeout), rather than failing the build:
    #: it is not tried again ([scheduler] build_retries_same_host). Not on the wire.
    timed_out: bool = False

    def trailing(self, host):
        """How many of the last attempts, one after the other, were on ``host``."""
        count = 0
        for tried, _node in reversed(self.hosts):
            if tried != host:
                break
            count += 1
        return count

    def same_host_retries(self):
        """The attempts that built the instance again on the host that had just failed it."""
        hosts = [host for host, _node in self.hosts]
        return sum(1 for before, after in zip(hosts, hosts[1:], strict=False) if before == after)

    @classmethod
    def from_wire(cls, value, where="filter_properties.retry"):
        if value is None:
            return cls()
        value = json_object(value, f"{where}:")
        hosts = sized_list(value.get("hosts") or [], f"{where}.hosts:", 0, MAX_LIST,
                                       "[host, node] pairs")
        pairs = []
        for i, pair in enumerate(hosts):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise InvalidRequest(f"{where}.hosts[{i}]: must be a [host, node] pair")
            at = f"{where}.hosts[{i}]"
            pairs.append([host_names.check(pair[0], at), _text(pair[1], at)])
        reason = value.get("exc_reason")
        return cls(
            num_attempts=integer(value.get("num_attempts", 0), f"{where}.num_attempts:", 0, 10_000),
            hosts=pairs,
            exc_reason=str(reason)[:4096] if reason is not None else None,
        )


@dataclasses.dataclass
class RequestSpec:
    instance_uuids: list
    flavor: Flavor
    project_id: str | None = None
    availability_zone: str | None = None
    image_properties: dict = dataclasses.field(default_factory=dict)
    scheduler_hints: dict = dataclasses.field(default_factory=dict)
    force_hosts: list = dataclasses.field(default_factory=list)
    force_nodes: list = dataclasses.field(default_factory=list)
    ignore_hosts: list = dataclasses.field(default_factory=list)
    retry: Retry = dataclasses.field(default_factory=Retry)
    instance_properties: dict = dataclasses.field(default_factory=dict)
    image_id: str | None = None
    #: {instance uuid: its name, or None}: from instance_properties.display_name (instance_names)
    display_names: dict = dataclasses.field(default_factory=dict)
    #: The request named its instances' UUIDs (else it gave num_instances, and they were made here).
    uuids_named: bool = True
    #: With min_num_instances (``berth server create --min-count``): as many of the instances as fit are
    #: placed, at least this many, the rest not booted. None: all of them or none.
    min_instances: int | None = None
    # Looked up by the scheduler before selection (scheduler.planning.lookups), never read from the wire:
    #: the server group of a ``group`` hint: {uuid, name, policy, rules, hosts: {host: members}}
    group: dict | None = None
    #: hosts of the instances named by the same_host / different_host hints (None: no hint)
    same_host_hosts: list | None = None
    different_host_hosts: list | None = None

    @property
    def num_instances(self):
        return len(self.instance_uuids)

    @property
    def at_least(self):
        """How many of the instances must be placed for any to be: all of them, unless the
        request asked for as many as fit (min_instances)."""
        least = self.min_instances
        return self.num_instances if least is None else min(least, self.num_instances)

    @property
    def required_traits(self):
        """The traits the host must have: the flavor's and the image's."""
        return self.flavor.required_traits | traits.of_image(self.image_properties)

    @property
    def forbidden_traits(self):
        return self.flavor.forbidden_traits

    def check_traits_and_policy(self):
        """Raise InvalidRequest if the image's traits or CPU policy contradict the flavor's, or its
        traits are malformed (checked with the rest of what the request asks for,
        scheduler.policy.extra_specs, so that the refused instance keeps its name and flavor)."""
        where = "request_spec.image.properties"
        clash = self.required_traits & self.forbidden_traits
        if clash:
            raise InvalidRequest(f"{where}[trait:{sorted(clash)[0]}]: the image requires a trait "
                                 "its flavor forbids")
        asked = self.image_properties.get(IMAGE_CPU_POLICY)
        if asked is not None:
            given = resource_classes.cpu_policy(self.flavor.extra_specs, "flavor.extra_specs")
            if asked != given:
                raise InvalidRequest(
                    f"{where}[{IMAGE_CPU_POLICY}]: asks for {str(asked)[:40]!r} but the flavor's "
                    f"{resource_classes.CPU_POLICY} is {given!r}: Berth takes the CPU policy from the "
                    "flavor; set it there")

    @classmethod
    def from_wire(cls, request_spec, filter_properties):
        request_spec = json_object(request_spec, "request_spec:")
        filter_properties = json_object(filter_properties, "filter_properties:")
        num = request_spec.get("num_instances")
        uuids = request_spec.get("instance_uuids")
        if uuids is None:
            count = integer(num if num is not None else 1, "request_spec.num_instances:", 1,
                         MAX_INSTANCES_PER_REQUEST)
            uuids = [str(uuidlib.uuid4()) for _ in range(count)]
        else:
            sized_list(uuids, "request_spec.instance_uuids:", 1, MAX_INSTANCES_PER_REQUEST, "UUIDs")
            uuids = [parse_uuid(u, f"request_spec.instance_uuids[{i}]") for i, u in enumerate(uuids)]
            if len(set(uuids)) != len(uuids):
                raise InvalidRequest("request_spec.instance_uuids: contains duplicates")
            if num is not None and num != len(uuids):
                raise InvalidRequest(
                    f"request_spec.num_instances: is {num!r} but {len(uuids)} instance_uuids given"
                )
        least = request_spec.get("min_num_instances")
        if least is not None:
            least = integer(least, "request_spec.min_num_instances:", 1, len(uuids))
        props = json_object(request_spec.get("instance_properties"), "request_spec.instance_properties:")
        image = json_object(request_spec.get("image"), "request_spec.image:")
        names = check_display_names(props.get("display_name"), len(uuids),
                                    "request_spec.instance_properties.display_name")
        return cls(
            instance_uuids=uuids,
            flavor=Flavor.from_wire(request_spec.get("instance_type")),
            project_id=_text(props.get("project_id"), "request_spec.instance_properties.project_id",
                             optional=True),
            availability_zone=_text(
                props.get("availability_zone"),
                "request_spec.instance_properties.availability_zone",
                optional=True,
            ),
            image_properties=_string_map(image.get("properties"), "request_spec.image.properties"),
            scheduler_hints=_string_map(
                filter_properties.get("scheduler_hints"), "filter_properties.scheduler_hints"
            ),
            force_hosts=_str_list(filter_properties.get("force_hosts"), "filter_properties.force_hosts"),
            force_nodes=_str_list(filter_properties.get("force_nodes"), "filter_properties.force_nodes"),
            ignore_hosts=_str_list(
                filter_properties.get("ignore_hosts"), "filter_properties.ignore_hosts"
            ),
            retry=Retry.from_wire(filter_properties.get("retry")),
            instance_properties=props,
            image_id=_text(image.get("id"), "request_spec.image.id", optional=True),
            display_names=dict(zip(uuids, names, strict=True)),
            uuids_named=request_spec.get("instance_uuids") is not None,
            min_instances=least,
        )

    def to_wire(self):
        request_spec = {
            "instance_uuids": list(self.instance_uuids),
            "num_instances": self.num_instances,
            "instance_type": self.flavor.to_wire(),
            "instance_properties": dict(
                self.instance_properties,
                project_id=self.project_id,
                availability_zone=self.availability_zone,
            ),
            "image": {"properties": dict(self.image_properties)},
        }
        if self.image_id is not None:
            request_spec["image"]["id"] = self.image_id
        if self.min_instances is not None:
            request_spec["min_num_instances"] = min(self.min_instances, self.num_instances)
        filter_properties = {
            "scheduler_hints": dict(self.scheduler_hints),
            "force_hosts": list(self.force_hosts),
            "force_nodes": list(self.force_nodes),
            "ignore_hosts": list(self.ignore_hosts),
            "retry": {"num_attempts": self.retry.num_attempts, "hosts": [list(p) for p in self.retry.hosts],
                      "exc_reason": self.retry.exc_reason},
        }
        return request_spec, filter_properties

    def instance_to_wire(self, instance_uuid):
        """The wire form of this request narrowed to one of its instances (what an agent receives)."""
        request_spec, filter_properties = self.to_wire()
        request_spec["instance_uuids"] = [instance_uuid]
        request_spec["num_instances"] = 1
        request_spec.pop("min_num_instances", None)
        if self.display_names.get(instance_uuid) is not None:
            # Its own name, which a request of one instance keeps as it is (a reschedule).
            request_spec["instance_properties"]["display_name"] = self.display_names[instance_uuid]
        return request_spec, filter_properties
