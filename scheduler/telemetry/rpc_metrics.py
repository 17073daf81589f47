"""What every Berth RPC server counts (the scheduler's and the agents'), by topic."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

BATCH_MESSAGES = Histogram(
    "berth_rpc_batch_messages",
    "Messages a server handled in one unit of work (for the scheduler: one database transaction), "
    "counted once it committed.",
    ["topic"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))

DEAD_LETTERS = Counter(
    "berth_rpc_dead_letters",
    "Messages a server could not process and sent to the dead-letter queue, by the queue they came "
    "from and the exception's class (InvalidRequest, NotAuthorized...).",
    ["queue", "reason"])

MESSAGES = Counter(
    "berth_rpc_messages",
    "Messages a server handled, by topic and method, counted once their unit of work committed.",
    ["topic", "method"])

CASTS = Counter(
    "berth_rpc_casts",
    "Casts sent, by the topic they were sent to and method (a fanout cast once, however many "
    "servers read it).",
    ["topic", "method"])

BUNDLES = Counter(
    "berth_rpc_bundles",
    "Bundles sent, by the topic they were sent to: messages that each carried several casts, which "
    "berth_rpc_casts counts one by one.",
    ["topic"])

BUNDLED_CASTS = Counter(
    "berth_rpc_bundled_casts",
    "The casts the bundles of berth_rpc_bundles carried, by topic.",
    ["topic"])


def count_handled(topic: str, methods: list[str]) -> None:
    """Count the messages of one committed unit of work, ``methods`` naming each one's method."""
    counts: dict[str, int] = {}
    for method in methods:
        counts[method] = counts.get(method, 0) + 1
    for method, n in counts.items():
        MESSAGES.labels(topic, method).inc(n)
