"""What every query family shares: rows as plain dicts, uuids in chunks."""

from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from scheduler.db.engine import to_db_time, to_iso

_IN_CHUNK = 500  # uuids per IN (...) clause

_T = TypeVar("_T")


def _row_dict(row: sa.RowMapping) -> dict[str, Any]:
    return {key: to_iso(value) if isinstance(value, datetime) else value for key, value in row.items()}


def _column_defaults(table: sa.Table) -> dict[str, Any]:
    """{column: its default value}, None for a column with no default or a computed one."""
    defaults: dict[str, Any] = {}
    for column in table.columns:
        default: Any = column.default
        defaults[column.name] = default.arg if default is not None and not callable(default.arg) else None
    return defaults


def _time_columns(table: sa.Table) -> frozenset[str]:
    return frozenset(c.name for c in table.columns if isinstance(c.type, sa.DateTime))



def _checked_values(values: Mapping[str, Any], allowed: AbstractSet[str], times: frozenset[str],
                    what: str) -> dict[str, Any]:
    """``values`` to write, their times as the database's: ValueError naming any key that is not
    one of ``allowed`` (``what``: "instance", "migration")."""
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f"not {what} columns: {', '.join(sorted(unknown))}")
    out = dict(values)
    for key in times.intersection(out):
        out[key] = to_db_time(out[key])
    return out


def _chunks(items: Iterable[_T], size: int = _IN_CHUNK) -> Iterator[list[_T]]:
    items = list(items)
    for start in range(0, len(items), size):
        yield items[start : start + size]


