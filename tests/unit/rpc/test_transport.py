"""Choosing a transport from its URL."""

import os

import pytest

from scheduler import rpc
from scheduler.rpc import topology
from scheduler.rpc import transport as transport_mod


@pytest.mark.parametrize("url", ["redis://localhost", "kafka://h:9092", "localhost:5672", ""])
def test_unsupported_url_is_a_clear_error(conf, url):
    with pytest.raises(ValueError) as info:
        rpc.get_transport(conf, url)
    assert "transport_url" in str(info.value)
    assert "rabbit://" in str(info.value) and "filesystem://" in str(info.value)


def test_url_defaults_to_transport_url(conf):
    conf.set_override("transport_url", "memory://")
    transport = rpc.get_transport(conf)
    assert transport.kind == "memory"
    transport.cleanup()


def test_filesystem_creates_its_folders_under_state_path(conf):
    transport = rpc.get_transport(conf, "filesystem://")
    broker = os.path.join(conf.state_path, "broker")
    assert os.path.isdir(os.path.join(broker, "queues"))
    assert os.path.isdir(os.path.join(broker, "control"))
    transport.cleanup()


def test_error_and_log_never_show_the_password(conf):
    url = "redis://admin:s3cret@h1:1,admin:s3cret@h2:2/"
    with pytest.raises(ValueError) as info:
        rpc.get_transport(conf, url)
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize("strategy, firsts", [("round-robin", {"h1"}), ("shuffle", {"h1", "h2", "h3"})])
def test_the_failover_strategy_chooses_the_first_node_a_connection_tries(conf, strategy, firsts):
    conf.set_override("kombu_failover_strategy", strategy, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "rabbit://u:p@h1,u:p@h2,u:p@h3/")
    assert {transport.connection("test").hostname for _ in range(60)} == firsts
    transport.cleanup()


def test_rabbit_cluster_url_becomes_one_kombu_url_per_host(conf):
    transport = rpc.get_transport(conf, "rabbit://u:p@h1:5672,u:p@h2/vh")
    conn = transport.connection("test")
    assert transport.is_rabbit
    assert transport_mod._rabbit_hosts("rabbit://u:p@h1:5672,u:p@h2/vh")[0] == [
        "amqp://u:p@h1:5672/vh",
        "amqp://u:p@h2:5672/vh",
    ]
    assert conn.hostname == "h1" and conn.virtual_host == "vh"
    assert conn.transport_options["confirm_publish"] is True
    assert "p@" not in transport.safe_url
    transport.cleanup()


def test_amqps_means_tls(conf):
    conf.set_override("ssl_ca_file", "/etc/ssl/ca.pem", group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "amqps://u:p@h1/")
    conn = transport.connection("test")
    assert conn.port == 5671
    assert conn.ssl["ca_certs"] == "/etc/ssl/ca.pem"
    transport.cleanup()


def test_publish_failure_after_retries_is_message_delivery_failure(conf):
    conf.set_override("publish_retries", 1, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_interval", 0.01, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "rabbit://u:p@127.0.0.1:1/")  # nothing listens there
    with pytest.raises(rpc.MessageDeliveryFailure):
        rpc.RPCClient(transport, rpc.Target(topic="t")).cast({}, "m")
    transport.cleanup()


def test_backoff_grows_and_is_capped(conf):
    conf.set_override("rabbit_retry_interval", 1, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_retry_backoff", 2, group="oslo_messaging_rabbit")
    conf.set_override("rabbit_interval_max", 6, group="oslo_messaging_rabbit")
    waits = transport_mod.delays(conf)
    assert [next(waits) for _ in range(5)] == [1, 3, 5, 6, 6]


@pytest.mark.parametrize("key, why", [("reply_" + "é" * 200, "406 bytes in UTF-8, over AMQP's 255"),
                                      ("compute.\ud800", "lone surrogate")])
def test_a_routing_key_amqp_cannot_carry_is_refused_at_once_without_retries(conf, key, why, caplog):
    conf.set_override("publish_retries", 5, group="oslo_messaging_rabbit")
    transport = rpc.get_transport(conf, "rabbit://u:p@127.0.0.1:1/")  # never reached
    client = rpc.RPCClient(transport, rpc.Target(topic="t"))
    with pytest.raises(rpc.InvalidName, match=why):
        with transport.publisher.batch():
            client.cast({}, "first")
            transport.publisher.publish({}, topology.DEFAULT_EXCHANGE, key)
    assert "retrying" not in caplog.text
    transport.cleanup()
