import uuid as uuidlib

import pytest

from berth_contract.request_spec import RequestSpec
from scheduler.exception import InvalidRequest

U1 = "6f1f5c8e-1111-4c6b-9d55-0a1b2c3d4e5f"
U2 = "6f1f5c8e-2222-4c6b-9d55-0a1b2c3d4e5f"
FLAVOR = {"memory_mb": 512, "root_gb": 1, "vcpus": 1}


def parse(request_spec=None, filter_properties=None):
    spec = {"instance_uuids": [U1], "instance_type": dict(FLAVOR)}
    spec.update(request_spec or {})
    return RequestSpec.from_wire(spec, filter_properties or {})


def test_round_trip_keeps_what_placement_needs():
    spec = parse(
        {"instance_uuids": [U1, U2], "num_instances": 2,
         "instance_properties": {"project_id": "p1", "availability_zone": "az1"},
         "image": {"properties": {"architecture": "x86_64"}}},
        {"scheduler_hints": {"group": "g"}, "ignore_hosts": ["h9"],
         "retry": {"num_attempts": 1, "hosts": [["h1", "h1"]], "exc_reason": "full"}},
    )
    again = RequestSpec.from_wire(*spec.to_wire())
    assert again == spec
    assert again.num_instances == 2 and again.project_id == "p1"
    assert again.retry.hosts == [["h1", "h1"]]


def test_missing_uuids_are_generated_from_num_instances():
    spec = RequestSpec.from_wire({"num_instances": 3, "instance_type": FLAVOR}, {})
    assert len(set(spec.instance_uuids)) == 3


def test_the_wire_form_of_one_instance_names_only_it():
    spec = parse({"instance_uuids": [U1, U2]})
    request_spec, filter_properties = spec.instance_to_wire(U2)
    assert (request_spec["instance_uuids"], request_spec["num_instances"]) == ([U2], 1)
    assert spec.instance_uuids == [U1, U2]  # the request itself is left whole
    whole = spec.to_wire()
    assert {k: v for k, v in request_spec.items() if k not in ("instance_uuids", "num_instances")} == {
        k: v for k, v in whole[0].items() if k not in ("instance_uuids", "num_instances")}
    assert filter_properties == whole[1]


def test_a_request_for_as_many_as_fit_keeps_its_minimum_and_each_instance_is_one_of_one():
    spec = parse({"instance_uuids": [U1, U2], "min_num_instances": 1})
    assert (spec.min_instances, spec.at_least) == (1, 1)
    assert RequestSpec.from_wire(*spec.to_wire()).min_instances == 1
    assert "min_num_instances" not in spec.instance_to_wire(U2)[0]  # a reschedule is one instance
    assert parse({"instance_uuids": [U1, U2]}).at_least == 2  # all or none


@pytest.mark.parametrize(
    ("request_spec", "filter_properties", "message"),
    [
        ({"instance_type": {**FLAVOR, "memory_mb": "512"}}, {},
         "request_spec.instance_type.memory_mb: must be an integer"),
        ({"instance_type": {**FLAVOR, "vcpus": 0}}, {}, "instance_type.vcpus: must be between 1"),
        ({"instance_type": {**FLAVOR, "root_gb": -1}}, {}, "root_gb: must be between 0"),
        ({"instance_type": {**FLAVOR, "memory_mb": 10**12}}, {}, "memory_mb: must be between"),
        ({"instance_type": {**FLAVOR, "memory_mb": 10**400}}, {}, "memory_mb: must be between 1 and"),
        ({"image": {"properties": {"hw_disk_bus": 10**400}}}, {},
         r"image.properties\[hw_disk_bus\]: must be a string, finite number or list"),
        ({}, {"scheduler_hints": {"cidr": -(10**400)}}, r"scheduler_hints\[cidr\]: must be a string, finite"),
        ({"instance_type": {**FLAVOR, "memory_mb": True}}, {}, "memory_mb: must be an integer"),
        ({"instance_type": None}, {}, "memory_mb: must be an integer, got None"),
        ({"instance_uuids": [U1, U1]}, {}, "contains duplicates"),
        ({"instance_uuids": ["not-a-uuid"]}, {}, r"instance_uuids\[0\]: must be a UUID"),
        ({"instance_uuids": [U1], "num_instances": 2}, {}, "num_instances: is 2 but 1"),
        ({"instance_uuids": []}, {}, "must be a list of 1 to"),
        ({}, {"scheduler_hints": "group=x"}, "filter_properties.scheduler_hints: must be an object"),
        ({}, {"retry": {"hosts": ["h1"]}}, r"retry.hosts\[0\]: must be a \[host, node\] pair"),
        ({}, {"force_hosts": [1]}, r"force_hosts\[0\]: must be a non-empty string"),
        ({"instance_uuids": [U1, U2], "min_num_instances": 3}, {},
         "request_spec.min_num_instances: must be between 1 and 2, got 3"),
        ({"min_num_instances": 0}, {}, "request_spec.min_num_instances: must be between 1 and 1, got 0"),
        ({"min_num_instances": "1"}, {}, "request_spec.min_num_instances: must be an integer"),
    ],
)
def test_bad_requests_name_the_field(request_spec, filter_properties, message):
    with pytest.raises(InvalidRequest, match=message):
        parse(request_spec, filter_properties)


def test_request_spec_must_be_an_object():
    with pytest.raises(InvalidRequest, match="request_spec: must be an object, got list"):
        RequestSpec.from_wire([1], {})


# -- instance names ------------------------------------------------------------

U3 = "6f1f5c8e-3333-4c6b-9d55-0a1b2c3d4e5f"


@pytest.mark.parametrize(
    ("template", "count", "names"),
    [
        ("web-%d", 3, ["web-1", "web-2", "web-3"]),
        ("web-%d", 1, ["web-1"]),
        ("%d-of-db-%d", 2, ["1-of-db-1", "2-of-db-2"]),
        ("web", 3, ["web-1", "web-2", "web-3"]),  # as Nova names several instances
        ("web", 1, ["web"]),
        ("50% full", 2, ["50% full-1", "50% full-2"]),
        (None, 2, [None, None]),
    ],
)
def test_instance_names(template, count, names):
    uuids = [U1, U2, U3][:count]
    props = {} if template is None else {"display_name": template}
    spec = parse({"instance_uuids": uuids, "instance_properties": props})
    assert spec.display_names == dict(zip(uuids, names, strict=True))


def test_each_instance_of_the_wire_form_carries_its_own_name_which_it_keeps():
    spec = parse({"instance_uuids": [U1, U2], "instance_properties": {"display_name": "web-%d"}})
    request_spec, filter_properties = spec.instance_to_wire(U2)
    assert request_spec["instance_properties"]["display_name"] == "web-2"
    assert RequestSpec.from_wire(request_spec, filter_properties).display_names == {U2: "web-2"}
    plain = parse({"instance_uuids": [U1, U2], "instance_properties": {"display_name": "web"}})
    request_spec, filter_properties = plain.instance_to_wire(U1)
    assert RequestSpec.from_wire(request_spec, filter_properties).display_names == {U1: "web-1"}
    assert RequestSpec.from_wire(*spec.to_wire()).display_names == spec.display_names


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "display_name: must be a non-empty string"),
        (7, "display_name: must be a non-empty string"),
        ("x" * 256, "display_name: must be a non-empty string of at most 255 characters"),
        ("web\x00", "display_name: must not hold control characters"),
        (" web", "display_name: must be printable text that does not start or end with a space"),
        ("web ", "display_name: must be printable text that does not start or end with a space"),
        ("we\u2028b", "display_name: must be printable text"),
        ("x" * 254, r"display_name: 'x+'\.\.\. is longer than 255 characters"),  # x...x-1
    ],
)
def test_a_bad_name_is_refused_naming_the_field(name, message):
    uuids = [str(uuidlib.uuid4()) for _ in range(10)]
    with pytest.raises(InvalidRequest, match=message):
        parse({"instance_uuids": uuids, "instance_properties": {"display_name": name}})


@pytest.mark.parametrize("given", [
    U1, U1.upper(), "{" + U1 + "}", "urn:uuid:" + U1, U1.replace("-", ""),
])
def test_an_instance_uuid_in_any_form_uuid_reads_is_taken_in_the_canonical_one(given):
    assert parse({"instance_uuids": [given]}).instance_uuids == [U1]


@pytest.mark.parametrize("given", [U1 + "\n", " " + U1, U1[:-1] + "g", U1[:-1], 7])
def test_an_instance_uuid_that_is_not_one_is_refused(given):
    with pytest.raises(InvalidRequest, match=r"instance_uuids\[0\]: must be a UUID"):
        parse({"instance_uuids": [given]})
