"""RPC API versions: a server refuses a version its endpoint does not serve, naming both;
a client sends the version it is prepared for, and nothing above its cap."""

import itertools
import json

import pytest
from oslo_messaging import _utils as oslo_utils

from berth_contract import versions
from scheduler import rpc
from scheduler.rpc import deadletter, envelope
from scheduler.rpc.exceptions import RPCVersionCapError
from tests.unit.rpc.conftest import WAIT, Recorder, publish_raw
from tests.unit.rpc.test_bad_input import dead_letters

DEMO = versions.API("demo", (("1.0", "place"), ("1.1", "place takes zone"), ("1.2", "place takes rack")))


class Demo(Recorder):
    """An endpoint serving ``api``; records each message's version."""

    def __init__(self, api):
        super().__init__()
        self.RPC_API = api

    def place(self, context, host, zone=None):
        self.record(context, host=host, zone=zone, version=context.version)
        return context.version


@pytest.mark.parametrize(("served", "requested"), list(itertools.product(
    ["1.0", "1.1", "1.10", "2.0", "1.1.1"], ["1.0", "1.1", "1.2", "1.10", "2.0", "0.9", "1.1.0", "1.1.2"])))
def test_versions_are_compatible_as_oslo_messaging_reads_them(served, requested):
    assert versions.is_compatible(served, requested) == oslo_utils.version_is_compatible(served, requested)


@pytest.mark.parametrize("version", ["1", "1.x", "v1.0", "1.0.0.0", "", " 1.0", 1.0, None, ["1.0"]])
def test_what_is_not_a_version_is_refused_by_name(version):
    with pytest.raises(ValueError, match=r"is not a version: give MAJOR.MINOR, e.g. 1.0"):
        versions.parse(version)


DEMO_2 = versions.API("demo", (*DEMO.history, ("2.0", "place takes a rack, not a zone")))


def test_an_api_history_grows_and_is_cut_at_a_release_within_a_major_version():
    assert DEMO.version == "1.2" and DEMO.serves("1.1") and not DEMO.serves("1.3")
    assert DEMO.at("1.1").version == "1.1" and DEMO.at("1.1").history == DEMO.history[:2]
    assert DEMO_2.version == "2.0" and DEMO_2.serves("2.0") and not DEMO_2.serves("1.2")
    assert DEMO_2.majors == (1, 2) and DEMO_2.at("1.2").history == DEMO.history
    for history in [(), (("1.1", "b"), ("1.0", "a")), (("1.0", "a"), ("1.0", "again")),
                    (("2.0", "a"), ("1.0", "b"))]:
        with pytest.raises(ValueError, match="the x API"):
            versions.API("x", history)


class Demo2(Recorder):
    RPC_API = DEMO_2

    def place(self, context, host, rack=None):
        self.record(context, host=host, rack=rack, version=context.version)
        return f"new {context.version}"


def test_a_server_of_two_major_versions_answers_each_from_the_endpoint_that_serves_it(
        transport, topic, start_server):
    new, old = Demo2(), Demo(DEMO_2.at("1.2"))
    start_server([new, old])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)

    assert client.prepare(version="2.0").call({}, "place", host="h0", rack="r1") == "new 2.0"
    assert client.prepare(version="1.1").call({}, "place", host="h1", zone="z") == "1.1"
    assert client.call({}, "place", host="h2") == "1.0"
    with pytest.raises(rpc.RemoteError) as info:
        client.prepare(version="2.1").call({}, "place", host="h3")
    assert info.value.value == (
        "Endpoint does not support RPC version 2.1. Attempted method: place; it serves the demo API up to "
        "2.0: set [upgrade_levels] demo = 2.0 where it is sent from, until this is upgraded")
    assert [kwargs["host"] for _, kwargs in new.received] == ["h0"]
    assert [kwargs["host"] for _, kwargs in old.received] == ["h1", "h2"]


def test_a_server_serves_the_versions_of_its_api_and_refuses_newer_ones_naming_both(
        transport, topic, start_server):
    endpoint = Demo(DEMO.at("1.1"))
    start_server([endpoint])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)

    assert client.call({}, "place", host="h0") == "1.0"
    assert client.prepare(version="1.1").call({}, "place", host="h1", zone="z") == "1.1"
    for version in ("1.2", "1.1.1"):
        with pytest.raises(rpc.RemoteError) as info:
            client.prepare(version=version).call({}, "place", host="h2")
        assert info.value.exc_type == "UnsupportedVersion"
        assert info.value.value == (
            f"Endpoint does not support RPC version {version}. Attempted method: place; it serves the demo "
            "API up to 1.1: set [upgrade_levels] demo = 1.1 where it is sent from, until this is upgraded")
    with pytest.raises(rpc.RemoteError) as info:  # a newer major version: capped below it, sent older
        client.prepare(version="2.0").call({}, "place", host="h3")
    assert info.value.value == ("Endpoint does not support RPC version 2.0. Attempted method: place; it "
                                "serves the demo API up to 1.1: set [upgrade_levels] demo = 1.1 where it "
                                "is sent from, until this is upgraded")
    with pytest.raises(rpc.RemoteError) as info:  # an older one: no cap can help
        client.prepare(version="0.9").call({}, "place", host="h3")
    assert info.value.value == ("Endpoint does not support RPC version 0.9. Attempted method: place; it "
                                "serves the demo API up to 1.1")
    assert [kwargs["host"] for _, kwargs in endpoint.received] == ["h0", "h1"]


def test_a_cast_of_a_version_not_served_is_dead_lettered_and_one_without_a_version_taken_as_1_0(
        transport, topic, start_server):
    endpoint = Demo(DEMO.at("1.0"))
    start_server([endpoint])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic))
    client.prepare(version="1.1").cast({}, "place", host="h1", zone="z")
    unversioned = envelope.request("place", {"host": "h2"})
    del unversioned["version"]  # as oslo.messaging sends it from a target without a version
    publish_raw(transport, topic, json.dumps(envelope.wrap(unversioned)))
    malformed = dict(envelope.request("place", {"host": "h3"}), version="one")
    publish_raw(transport, topic, json.dumps(envelope.wrap(malformed)))

    assert endpoint.wait_for(1)
    letters = dead_letters(transport, 2)
    assert [m.headers[deadletter.REASON] for m in letters] == [
        "UnsupportedVersion: Endpoint does not support RPC version 1.1. Attempted method: place; it serves "
        "the demo API up to 1.0: set [upgrade_levels] demo = 1.0 where it is sent from, until this is "
        "upgraded",
        "InvalidEnvelope: message version: 'one' is not a version: give MAJOR.MINOR, e.g. 1.0",
    ]
    assert letters[0].headers[deadletter.METHOD] == "place"
    assert [(kwargs["host"], kwargs["version"]) for _, kwargs in endpoint.received] == [("h2", "1.0")]


def test_an_endpoint_without_an_api_serves_1_0_alone(transport, topic, start_server):
    endpoint = Recorder()
    start_server([endpoint])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT)
    assert client.call({}, "echo", x=1)["args"] == {"x": 1}
    with pytest.raises(rpc.RemoteError, match="does not support RPC version 1.1. Attempted method: echo; it "
                                              "serves its API up to 1.0$"):
        client.prepare(version="1.1").call({}, "echo", x=1)


def test_a_message_above_the_cap_is_refused_by_the_client_and_nothing_is_sent(transport, topic, start_server):
    endpoint = Demo(DEMO)
    start_server([endpoint])
    client = rpc.RPCClient(transport, rpc.Target(topic=topic), timeout=WAIT, version_cap="1.1", api="demo")
    assert client.can_send_version("1.1") and not client.can_send_version("1.2")
    assert client.can_send_version() and not client.prepare(version="1.2").can_send_version()
    for send in (client.prepare(version="1.2").cast, client.prepare(version="1.2").call):
        with pytest.raises(RPCVersionCapError) as info:
            send({}, "place", host="refused")
        assert str(info.value) == (
            "place needs version 1.2 of the demo API, above its cap [upgrade_levels] demo = 1.1: not sent. "
            "Raise the cap once every server of the demo API serves 1.2")
    with pytest.raises(RPCVersionCapError, match=r"^place needs version 2.0, above this client's cap 1.1"):
        rpc.RPCClient(transport, rpc.Target(topic=topic), version_cap="1.1").prepare(version="2.0").cast(
            {}, "place", host="refused")
    assert client.prepare(version="1.1").call({}, "place", host="h1") == "1.1"
    assert [kwargs["host"] for _, kwargs in endpoint.received] == ["h1"]


def test_a_client_refuses_a_cap_or_a_version_that_is_not_one(transport, topic):
    with pytest.raises(ValueError, match="'latest' is not a version"):
        rpc.RPCClient(transport, rpc.Target(topic=topic), version_cap="latest")
    with pytest.raises(ValueError, match="'1' is not a version"):
        rpc.RPCClient(transport, rpc.Target(topic=topic)).prepare(version="1")
