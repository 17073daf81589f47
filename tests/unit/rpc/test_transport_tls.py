"""TLS to RabbitMQ: what amqps:// and [oslo_messaging_rabbit] ssl hand to kombu."""

import ssl

import pytest

from scheduler import rpc


@pytest.fixture
def tls_conf(conf):
    conf.set_override("ssl_ca_file", "/etc/berth/ca.pem", "oslo_messaging_rabbit")
    conf.set_override("ssl_cert_file", "/etc/berth/client.pem", "oslo_messaging_rabbit")
    conf.set_override("ssl_key_file", "/etc/berth/client.key", "oslo_messaging_rabbit")
    return conf


def test_amqps_url_connects_with_the_ca_and_client_certificate(tls_conf):
    transport = rpc.get_transport(tls_conf, "amqps://agent:secret@rabbit1/berth")
    conn = transport.connection("test")
    assert conn.ssl == {
        "ca_certs": "/etc/berth/ca.pem",
        "cert_reqs": ssl.CERT_REQUIRED,
        "certfile": "/etc/berth/client.pem",
        "keyfile": "/etc/berth/client.key",
        "server_hostname": None,  # kombu puts the broker's host name here: it is checked
    }
    assert (conn.hostname, conn.port, conn.virtual_host) == ("rabbit1", 5671, "berth")
    assert conn.transport_cls == "amqp"


def test_ssl_option_turns_tls_on_for_rabbit_urls_and_keeps_ports(tls_conf):
    tls_conf.set_override("ssl", True, "oslo_messaging_rabbit")
    transport = rpc.get_transport(tls_conf, "rabbit://u:p@r1:5671,u:p@r2:5671/v")
    conn = transport.connection("test")
    assert conn.ssl["ca_certs"] == "/etc/berth/ca.pem"
    assert conn.ssl["certfile"] == "/etc/berth/client.pem"
    assert "server_hostname" not in conn.ssl  # a cluster: the CA chain is verified
    assert [(c.split("@")[1]) for c in conn.alt] == ["r1:5671/v", "r2:5671/v"]
    # Each connection gets its own copy (kombu writes into it).
    assert transport.connection("other").ssl is not conn.ssl


def test_ssl_without_files_is_plain_tls_and_without_it_none(conf):
    conf.set_override("ssl", True, "oslo_messaging_rabbit")
    assert rpc.get_transport(conf, "rabbit://u:p@r1/").connection("t").ssl is True
    conf.set_override("ssl", False, "oslo_messaging_rabbit")
    assert not rpc.get_transport(conf, "rabbit://u:p@r1/").connection("t").ssl
    assert rpc.get_transport(conf, "amqps://u:p@r1/").connection("t").ssl is True
