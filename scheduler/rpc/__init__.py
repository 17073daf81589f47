"""Berth's messaging: RPC over kombu, speaking oslo.messaging's rabbit wire format 2.0.

transport = rpc.get_transport(conf)
client = rpc.RPCClient(transport, rpc.Target(topic="scheduler"))
client.cast(ctxt, "run_instance", request_spec=..., filter_properties=...)
client.prepare(server=host, version="1.1").cast(...)  # a version of the API (berth_contract.versions)
server = rpc.get_rpc_server(transport, rpc.Target("compute", server=host), [endpoint])
"""

from scheduler.rpc.access import Access
from scheduler.rpc.client import RPCClient
from scheduler.rpc.context import Context, each_request, handling, new_request_id, request_id_of
from scheduler.rpc.dispatcher import batch_of, read_only
from scheduler.rpc.exceptions import (
    BrokerUnreachable,
    InvalidName,
    LoginRefused,
    MessageDeliveryFailure,
    MessagingException,
    MessagingTimeout,
    NoConsumer,
    NoQueue,
    NoSuchMethod,
    QueueInUse,
    RemoteError,
    RetryLater,
    RPCVersionCapError,
    ServiceUnavailable,
    UnsupportedVersion,
    WorkBroken,
)
from scheduler.rpc.roles import AGENT_OF_HOST, ANYONE, CLIENT, OPERATOR, SCHEDULER, callers
from scheduler.rpc.target import Target
from scheduler.rpc.transport import Transport, get_transport

__all__ = [
    "AGENT_OF_HOST",
    "ANYONE",
    "Access",
    "CLIENT",
    "OPERATOR",
    "SCHEDULER",
    "BrokerUnreachable",
    "InvalidName",
    "LoginRefused",
    "Context",
    "MessageDeliveryFailure",
    "MessagingException",
    "MessagingTimeout",
    "NoConsumer",
    "NoQueue",
    "NoSuchMethod",
    "QueueInUse",
    "RPCClient",
    "RPCServer",
    "RemoteError",
    "RetryLater",
    "RPCVersionCapError",
    "ServiceUnavailable",
    "UnsupportedVersion",
    "Target",
    "WorkBroken",
    "Transport",
    "batch_of",
    "callers",
    "each_request",
    "get_rpc_server",
    "get_transport",
    "handling",
    "new_request_id",
    "request_id_of",
    "read_only",
]


def __getattr__(name):
    """RPCServer and get_rpc_server, imported when first asked for: a client (the command line)
    never serves."""
    if name in ("RPCServer", "get_rpc_server"):
        from scheduler.rpc import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
