"""The option that turns the amqp fast paths off: ``[oslo_messaging_rabbit] amqp_fast_paths``."""

from oslo_config import cfg

GROUP = "oslo_messaging_rabbit"

opts = [
    cfg.BoolOpt(
        "amqp_fast_paths",
        default=True,
        help="Talk to RabbitMQ through Berth's own code for the hot paths: frames read "
        "from a buffer 64 KiB at a time, deliveries handed to their consumer without "
        "py-amqp's generic method dispatch, a batch of publishes framed and sent in one "
        "write, and one wait for all their publisher confirms. This code uses py-amqp "
        "internals and is checked against amqp 5.2 to 5.4, and taken only with those. Turned "
        "off, Berth uses py-amqp's and kombu's public API: the same messages on the "
        "wire and the same guarantee (every message confirmed by the broker), but each "
        "publish waits for its own confirm, so batches (replies, casts to many hosts) "
        "are sent several times slower, and receiving takes more system calls and CPU. Turn it "
        "off if something goes wrong with an amqp newer than that range; Berth also "
        "falls back by itself, with a warning at start-up, when the installed amqp is "
        "outside the range or lacks what the fast paths need.",
    ),
]


def list_opts() -> list:
    return [(GROUP, opts)]
