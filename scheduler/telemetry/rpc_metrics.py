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
