"""Boot instances through Berth from a service built on oslo.messaging.

What an API service does to use the Berth scheduler: cast ``run_instance`` to
the topic ``scheduler`` (on the exchange ``berth``), then call
``list_instances`` until the instances it asked for are ACTIVE::

    python examples/oslo_messaging_client.py \\
        --config-file examples/oslo_messaging_client.conf --flavor m1.small --count 3

Needs only oslo.messaging, not Berth. The one setting to get right is in the
example configuration: ``[oslo_messaging_rabbit] amqp_durable_queues = true``,
because the Berth scheduler declares its exchange durable and RabbitMQ refuses
a client that declares it otherwise.
"""

import sys
import time
import uuid

import oslo_messaging
from oslo_config import cfg

PROG = "oslo_messaging_client"

#: What Berth expects in request_spec["instance_type"] (Nova's classic m1 flavors).
FLAVORS = {
    "m1.tiny": {"memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "vcpus": 1},
    "m1.small": {"memory_mb": 2048, "root_gb": 20, "ephemeral_gb": 0, "vcpus": 1},
    "m1.medium": {"memory_mb": 4096, "root_gb": 40, "ephemeral_gb": 0, "vcpus": 2},
    "m1.large": {"memory_mb": 8192, "root_gb": 80, "ephemeral_gb": 0, "vcpus": 4},
    "m1.xlarge": {"memory_mb": 16384, "root_gb": 160, "ephemeral_gb": 0, "vcpus": 8},
}
#: Where an instance stays once the scheduler and its agent are done with it.
SETTLED = ("ACTIVE", "ERROR", "DELETED")

cli_opts = [
    cfg.StrOpt("flavor", default="m1.tiny", choices=list(FLAVORS), help="The flavor to boot."),
    cfg.IntOpt("count", default=1, min=1, max=1000, help="How many instances to boot."),
    cfg.IntOpt("timeout", default=120, min=1, help="Seconds to wait for the instances to settle."),
]


def boot(client, flavor, count, project="admin"):
    """Cast one run_instance for ``count`` instances, as `berth server create` does; returns their UUIDs."""
    uuids = [str(uuid.uuid4()) for _ in range(count)]
    request_spec = {
        "instance_uuids": uuids,
        "num_instances": count,
        "instance_type": dict(FLAVORS[flavor], name=flavor),
        "instance_properties": {"project_id": project},
        "image": {"properties": {}},
    }
    filter_properties = {"scheduler_hints": {}}
    client.cast({"project_id": project}, "run_instance",
                request_spec=request_spec, filter_properties=filter_properties)
    return uuids


def wait_for(client, uuids, timeout):
    """Call list_instances until every instance has settled; returns them, in order."""
    deadline = time.monotonic() + timeout
    while True:
        found = {i["uuid"]: i for i in client.call({}, "list_instances", include_deleted=True, uuids=uuids)}
        if all(found.get(u, {}).get("state") in SETTLED for u in uuids):
            return [found[u] for u in uuids]
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {len(uuids)} instance(s)")
        time.sleep(0.5)


def main(argv=None):
    # cfg.CONF, as a service has it: oslo.messaging registers some of its options there only.
    conf = cfg.CONF
    conf.register_cli_opts(cli_opts)
    conf(argv, project="berth-example", default_config_files=[])  # --config-file FILE
    transport = oslo_messaging.get_rpc_transport(conf)
    client = oslo_messaging.get_rpc_client(transport, oslo_messaging.Target(topic="scheduler"))
    try:
        instances = wait_for(client, boot(client, conf.flavor, conf.count), conf.timeout)
    except oslo_messaging.MessageDeliveryFailure as exc:
        if "inequivalent arg 'durable'" not in str(exc):
            raise
        # (The other way round, oslo.messaging falls back to the non-durable exchange by itself.)
        return (f"{PROG}: RabbitMQ refused the exchange {conf.control_exchange!r} as declared: set "
                "[oslo_messaging_rabbit] amqp_durable_queues = true to match the Berth scheduler's "
                "durable exchange")
    except oslo_messaging.MessagingTimeout:
        return (f"{PROG}: no answer from the Berth scheduler: is it running, with this transport_url "
                "and control_exchange?")
    except TimeoutError as exc:
        return f"{PROG}: {exc}"
    finally:
        transport.cleanup()
    for i in instances:
        print(f"{i['uuid']} {i['state']} {i['host'] or '-'} {i['fault_reason'] or ''}".rstrip())
    return 0 if all(i["state"] == "ACTIVE" for i in instances) else 1


if __name__ == "__main__":
    sys.exit(main())
