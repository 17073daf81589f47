from oslo_config import cfg

group = cfg.OptGroup(
    "oslo_messaging_rabbit",
    title="RabbitMQ",
    help="The RabbitMQ transport. Option names follow oslo.messaging's, so that "
    "operators can reuse what they know; defaults differ where noted.",
)

opts = [
    cfg.BoolOpt(
        "amqp_durable_queues",
        default=True,
        help="Declare exchanges and shared queues durable and publish persistent "
        "messages. Every peer on the exchange, oslo.messaging clients included, must "
        "use the same value or RabbitMQ refuses the declaration. (oslo.messaging's "
        "default is False.)",
    ),
    cfg.BoolOpt(
        "amqp_auto_delete",
        default=False,
        help="Auto-delete the shared queues and the topic exchange.",
    ),
    cfg.BoolOpt(
        "rabbit_quorum_queue",
        default=False,
        help="Declare the shared queues as quorum queues (x-queue-type=quorum), with "
        "<control_exchange>.dlx as their dead-letter exchange (x-dead-letter-exchange), and "
        "the dead-letter queue <control_exchange>.dead-letters as a quorum queue too, so that "
        "on a cluster the services declare and consume them while a node is down. "
        "Every peer declaring these queues, oslo.messaging ones included, must use the "
        "same arguments, or RabbitMQ refuses the declaration.",
    ),
    cfg.StrOpt(
        "kombu_failover_strategy",
        default="round-robin",
        choices=("round-robin", "shuffle"),
        help="The order in which a service tries the brokers of transport_url: round-robin "
        "from the first (every service connects to the first node that answers), or "
        "shuffle, a random order per connection attempt, which spreads a cluster's "
        "connections over its nodes.",
    ),
    cfg.IntOpt(
        "delivery_limit",
        default=5,
        min=0,
        help="How many times a message may take down the worker handling it before it is "
        "dead-lettered instead of handled again (0: no limit). A redelivered message is "
        "handled alone, and each worker counts, under state_path, the messages it was "
        "handling alone when it stopped. With rabbit_quorum_queue, RabbitMQ counts too: the "
        "shared queues get x-delivery-limit = 2 * delivery_limit + 1, a backstop (RabbitMQ "
        "counts every message that was in flight when a worker stopped, not only the one it "
        "was handling). A quorum queue declared before with another value must be deleted, "
        "or given the value by a policy.",
    ),
    cfg.IntOpt(
        "rabbit_qos_prefetch_count",
        default=64,
        min=1,
        help="Unacknowledged messages a consumer may hold at once.",
    ),
    cfg.IntOpt(
        "heartbeat_timeout_threshold",
        default=60,
        min=0,
        help="Seconds without AMQP heartbeat before the connection is taken for dead (0 off).",
    ),
    cfg.FloatOpt(
        "rabbit_retry_interval", default=1.0, min=0.0, help="First delay before reconnecting."
    ),
    cfg.FloatOpt(
        "rabbit_retry_backoff",
        default=2.0,
        min=0.0,
        help="Added to the reconnect delay after each failed attempt.",
    ),
    cfg.FloatOpt(
        "rabbit_interval_max", default=30.0, min=0.0, help="Longest delay between reconnects."
    ),
    cfg.IntOpt(
        "rabbit_transient_queues_ttl",
        default=1800,
        min=0,
        help="Seconds a reply or fanout queue may stay unused before RabbitMQ deletes it "
        "(x-expires), so that queues of processes that died do not pile up (0 off).",
    ),
    cfg.IntOpt(
        "publish_retries",
        default=5,
        min=0,
        help="Times a message is published again after a connection error, with the "
        "reconnect backoff between attempts, before the send fails with "
        "MessageDeliveryFailure. (Consumers reconnect for ever.)",
    ),
    cfg.IntOpt(
        "max_message_bytes",
        default=1024 * 1024,
        min=1024,
        help="Largest message body (bytes) a Berth server accepts. A larger body is "
        "refused without being decoded: dead-lettered if it is a cast (a call cannot be "
        "answered, since its reply queue is inside the body).",
    ),
    cfg.IntOpt(
        "dead_letter_max_length",
        default=10_000,
        min=1,
        help="Messages the dead-letter queue <control_exchange>.dead-letters keeps at most; "
        "past it, or past dead_letter_max_bytes, the oldest are dropped (RabbitMQ's "
        "x-max-length with x-overflow drop-head; on filesystem:// Berth drops the oldest "
        "files). A queue an earlier Berth declared without these bounds is used as it is, "
        "and the services say once at start how to bound it.",
    ),
    cfg.IntOpt(
        "dead_letter_max_bytes",
        default=64 * 1024 * 1024,
        min=1024,
        help="Bytes of message bodies the dead-letter queue keeps at most (RabbitMQ's "
        "x-max-length-bytes; on filesystem://, the files' sizes); the oldest go first.",
    ),
    cfg.BoolOpt("ssl", default=False, help="Connect to RabbitMQ over TLS (also implied by amqps://)."),
    cfg.StrOpt("ssl_ca_file", help="CA bundle that signs the broker's certificate."),
    cfg.StrOpt("ssl_cert_file", help="Client certificate for the broker."),
    cfg.StrOpt("ssl_key_file", help="Key of the client certificate."),
    cfg.FloatOpt(
        "polling_interval",
        default=0.05,
        min=0.001,
        help="Seconds between polls of the filesystem:// and memory:// transports, "
        "which have no push delivery.",
    ),
]


def list_opts():
    return [(group, opts)]
