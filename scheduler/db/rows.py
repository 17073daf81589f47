"""What every query family shares: rows as plain dicts, uuids in chunks."""

from datetime import datetime

import sqlalchemy as sa

from scheduler.db.engine import to_iso

_IN_CHUNK = 500  # uuids per IN (...) clause


def _row_dict(row):
    return {key: to_iso(value) if isinstance(value, datetime) else value for key, value in row.items()}


def _time_columns(table):
    return frozenset(c.name for c in table.columns if isinstance(c.type, sa.DateTime))



def _chunks(items, size=_IN_CHUNK):
    items = list(items)
    for start in range(0, len(items), size):
        yield items[start : start + size]


