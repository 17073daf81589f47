"""What every Berth process counts of its connections to the broker and the database."""

from __future__ import annotations

from prometheus_client import Counter

BROKER_RECONNECTS = Counter(
    "berth_broker_reconnects",
    "Times a consumer got its connection to the broker back after losing it.")

DATABASE_CONNECTIONS = Counter(
    "berth_database_connections",
    "Connections opened to the database: the pool's first ones, and each one opened again after "
    "a connection was lost or recycled.")

DATABASE_RETRIES = Counter(
    "berth_database_retries",
    "Database operations run again after a transient failure (a lost connection, a deadlock, a "
    "serialization failure).")
