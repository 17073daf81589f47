"""What a scaling group's writes check, one group at a time or a chunk at once: the values
a caller may write, and the instance rows of new members."""

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from scheduler import states
from scheduler.db.engine import to_db_time
from scheduler.db.instances import _INSTANCE_DEFAULTS, _INSTANCE_WRITABLE, _instance_values

#: The columns a caller may write (leases, versions and times are the queries').
GROUP_UPDATABLE = frozenset({
    "name", "project_id", "spec", "template", "paused", "desired", "status", "last_synced_at",
    "replace_after", "replace_failures",
})
_GROUP_TIMES = frozenset({"last_synced_at", "replace_after"})
_GROUP_COUNTS = frozenset({"desired", "replace_failures"})
_GROUP_MAPPINGS = frozenset({"spec", "template", "status"})


def group_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` checked and made ready to write; ValueError for one no group may hold."""
    unknown = set(values) - GROUP_UPDATABLE
    if unknown:
        raise ValueError(f"not scaling group columns one may write: {', '.join(sorted(unknown))}")
    out = dict(values)
    for key, value in out.items():
        if key in _GROUP_TIMES:
            out[key] = to_db_time(value)
        elif key in _GROUP_COUNTS and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"scaling group {key} must be a whole number of at least 0, got {value!r}")
        elif key in _GROUP_MAPPINGS and value is not None:
            if not isinstance(value, Mapping):
                raise ValueError(f"scaling group {key} must be a JSON object, got {type(value).__name__}")
            out[key] = dict(value)
        elif key == "paused" and not isinstance(value, bool):
            raise ValueError(f"scaling group paused must be true or false, got {value!r}")
        elif key == "name" and (not isinstance(value, str) or not value):
            raise ValueError("a scaling group needs a name")
    for key in ("spec", "template"):
        if key in out and out[key] is None:
            raise ValueError(f"a scaling group needs a {key}")
    return out


def new_member_rows(group: Mapping[str, Any], records: Iterable[Mapping[str, Any]], now: datetime
                    ) -> list[dict[str, Any]]:
    """The instance rows of ``group``'s new members (SCHEDULING, of the group and its project
    unless they say otherwise), created ``now``; ValueError for a member no group may get."""
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        row = {key: _INSTANCE_DEFAULTS[key] for key in _INSTANCE_WRITABLE}
        row.update(project_id=group["project_id"], state=states.SCHEDULING, created_at=now,
                   updated_at=now)
        row.update(_instance_values(record, _INSTANCE_WRITABLE))
        if not row["uuid"] or row["uuid"] in rows:
            raise ValueError(f"each new member needs a uuid of its own, got {row['uuid']!r}")
        if row["state"] != states.SCHEDULING:
            raise ValueError(f"a new member is {states.SCHEDULING}, not {row['state']}")
        if row["scaling_group_uuid"] not in (None, group["uuid"]):
            raise ValueError(f"member {row['uuid']} is of group {row['scaling_group_uuid']}")
        row["scaling_group_uuid"] = group["uuid"]
        rows[row["uuid"]] = row
    return list(rows.values())
