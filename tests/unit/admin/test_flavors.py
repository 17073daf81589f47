"""The flavors' RPC endpoint (scheduler.admin.flavors) over memory:// and SQLite."""

import pytest

from scheduler import rpc
from scheduler.admin.flavors import FlavorEndpoint
from scheduler.client import SchedulerClient
from scheduler.exception import InvalidRequest
from scheduler.rpc import roles
from tests.unit.scheduler.service_parts import transport_and_database


def _flavor(name="web.large", **values):
    return {"name": name, "memory_mb": 8192, "root_gb": 40, "ephemeral_gb": 10, "vcpus": 4, **values}


@pytest.fixture
def world(conf):
    transport, database = transport_and_database(conf)
    yield FlavorEndpoint(database, conf), database
    transport.cleanup()
    database.dispose()


@pytest.fixture
def endpoint(world):
    return world[0]


def test_create_then_show_and_list(endpoint):
    created = endpoint.create_flavor({}, _flavor(extra_specs={"hw:cpu_policy": "dedicated"}))
    assert created["name"] == "web.large" and created["memory_mb"] == 8192 and created["vcpus"] == 4
    assert created["extra_specs"] == {"hw:cpu_policy": "dedicated"}
    assert endpoint.show_flavor({}, "web.large") == created
    assert [f["name"] for f in endpoint.list_flavors({})] == [
        "m1.large", "m1.medium", "m1.small", "m1.tiny", "m1.xlarge", "web.large"]


def test_sizes_default_to_no_disk(endpoint):
    created = endpoint.create_flavor({}, {"name": "diskless", "memory_mb": 256, "vcpus": 1})
    assert (created["root_gb"], created["ephemeral_gb"], created["extra_specs"]) == (0, 0, {})


@pytest.mark.parametrize(("flavor", "message"), [
    (_flavor(memory_mb=0), "flavor.memory_mb"),
    (_flavor(vcpus="four"), "flavor.vcpus"),
    (_flavor(root_gb=-1), "flavor.root_gb"),
    (_flavor(ephemeral_gb=1.5), "flavor.ephemeral_gb"),
    ({"name": "x", "vcpus": 1}, "flavor.memory_mb"),
    (_flavor(name=""), "flavor name"),
    (_flavor(name=" padded"), "flavor name"),
    (_flavor(name="x" * 256), "flavor name"),
    (_flavor(extra_specs={"hw:cpu_policy": 2}),
     r"flavor.extra_specs\[hw:cpu_policy\]: the value must be a string"),
    (_flavor(extra_specs=["a"]), "flavor.extra_specs: give 0 to 100"),
    (_flavor(swap=512), "unknown field.* swap"),
    ("m1.huge", "flavor: must be an object"),
])
def test_a_bad_flavor_is_refused_naming_the_field_and_nothing_is_saved(world, flavor, message):
    endpoint, database = world
    before = database.list_flavors()
    with pytest.raises(InvalidRequest, match=message):
        endpoint.create_flavor({}, flavor)
    assert database.list_flavors() == before


def test_a_duplicate_name_is_refused(endpoint):
    endpoint.create_flavor({}, _flavor())
    with pytest.raises(InvalidRequest, match="a flavor named 'web.large' exists already"):
        endpoint.create_flavor({}, _flavor(memory_mb=1024))
    with pytest.raises(InvalidRequest, match="a flavor named 'm1.tiny' exists already"):
        endpoint.create_flavor({}, _flavor("m1.tiny"))
    assert endpoint.show_flavor({}, "web.large")["memory_mb"] == 8192


@pytest.mark.parametrize("call", [
    lambda e: e.show_flavor({}, "m9.nope"),
    lambda e: e.delete_flavor({}, "m9.nope"),
    lambda e: e.set_flavor_properties({}, "m9.nope", {"a": "b"}),
    lambda e: e.unset_flavor_properties({}, "m9.nope", ["a"]),
])
def test_an_unknown_name_is_refused_naming_it_alone(endpoint, call):
    with pytest.raises(InvalidRequest) as info:
        call(endpoint)
    assert str(info.value) == "no flavor named 'm9.nope'"


def test_set_and_unset_properties(endpoint):
    endpoint.create_flavor({}, _flavor())
    changed = endpoint.set_flavor_properties({}, "web.large",
                                             {"hw:cpu_policy": "dedicated", "quota:cpu_shares": "1"})
    assert changed["extra_specs"] == {"hw:cpu_policy": "dedicated", "quota:cpu_shares": "1"}
    changed = endpoint.unset_flavor_properties({}, "web.large", ["quota:cpu_shares"])
    assert changed["extra_specs"] == {"hw:cpu_policy": "dedicated"}
    with pytest.raises(InvalidRequest, match="flavor 'web.large' has no property 'quota:cpu_shares'"):
        endpoint.unset_flavor_properties({}, "web.large", ["quota:cpu_shares"])


@pytest.mark.parametrize(("properties", "message"), [
    ({}, "properties: give 1 to 100"),
    ({"k": 1}, r"properties\[k\]: the value must be a string"),
    ({"": "v"}, "properties: key '' must be a non-empty string"),
    ({"k": "v" * 256}, r"properties\[k\]: the value must be a string of at most 255"),
])
def test_bad_properties_are_refused_and_nothing_changes(world, properties, message):
    endpoint, database = world
    with pytest.raises(InvalidRequest, match=message):
        endpoint.set_flavor_properties({}, "m1.tiny", properties)
    assert database.get_flavor("m1.tiny")["extra_specs"] == {}


def test_unset_needs_keys(endpoint):
    with pytest.raises(InvalidRequest, match="keys: give one or more property names"):
        endpoint.unset_flavor_properties({}, "m1.tiny", [])


def test_delete(world):
    endpoint, database = world
    endpoint.delete_flavor({}, "m1.xlarge")
    assert "m1.xlarge" not in [f["name"] for f in database.list_flavors()]


def test_reads_are_for_clients_and_writes_for_operators():
    endpoint = FlavorEndpoint(None)
    for name in ("list_flavors", "show_flavor"):
        assert roles.declared(getattr(endpoint, name)).roles == {roles.CLIENT}
    for name in ("create_flavor", "set_flavor_properties", "unset_flavor_properties", "delete_flavor"):
        assert roles.declared(getattr(endpoint, name)).roles == {roles.OPERATOR}


def test_the_client_reaches_it_at_admin_1_1(conf, world):
    endpoint, _database = world
    transport = rpc.get_transport(conf)
    server = rpc.get_rpc_server(transport, rpc.Target(topic="scheduler", server="s1"), [endpoint])
    server.start()
    try:
        client = SchedulerClient(transport, timeout=10)
        assert client.admin_call({}, "show_flavor", name="m1.small")["memory_mb"] == 2048
        with pytest.raises(rpc.RemoteError, match="no flavor named 'm9'"):
            client.admin_call({}, "show_flavor", name="m9")
    finally:
        server.stop()
        server.wait()


@pytest.mark.parametrize("specs, why", [
    ({"colour": "blue"}, "flavor gpu: extra spec colour is read by AggregateInstanceExtraSpecsFilter or "
     "ComputeCapabilitiesFilter, which is not enabled: add it to [filter_scheduler] enabled_filters, or "
     "leave the key out"),
    ({"zzz:x": "1"}, "flavor gpu: extra spec zzz:x: no enabled filter reads it, it is not a resource, and "
     "it is not a key Berth leaves to the hypervisor: leave it out (user guide: Flavors and images)"),
    ({"pci_passthrough:alias": "a1:1"}, "flavor gpu: extra spec pci_passthrough:alias is not supported"),
    ({"resources:VGPU": "x"}, "flavor gpu: extra_specs[resources:VGPU]: the amount must be a whole number"),
])
def test_a_flavor_no_request_could_use_is_refused_naming_the_key(world, specs, why):
    endpoint, database = world
    with pytest.raises(InvalidRequest) as refused:
        endpoint.create_flavor({}, _flavor("gpu", extra_specs=specs))
    assert why in str(refused.value)
    endpoint.create_flavor({}, _flavor("gpu", extra_specs={"resources:VGPU": "1"}))
    with pytest.raises(InvalidRequest) as refused:
        endpoint.set_flavor_properties({}, "gpu", specs)
    assert why in str(refused.value)
    assert database.get_flavor("gpu")["extra_specs"] == {"resources:VGPU": "1"}


def test_a_flavor_asking_for_gpus_traits_and_dedicated_cpus_is_taken(endpoint):
    specs = {"resources:VGPU": "1", "trait:CUSTOM_SSD": "required", "trait:HW_CPU_X86_AVX512F": "forbidden",
             "hw:cpu_policy": "dedicated", "hw:mem_page_size": "large"}
    assert endpoint.create_flavor({}, _flavor("gpu", extra_specs=specs))["extra_specs"] == specs
