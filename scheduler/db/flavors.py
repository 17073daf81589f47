"""The flavors table: named sizes and extra specs that ``berth server create --flavor NAME`` requests."""

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from scheduler.db.engine import Conflict, DatabaseEngine, NotFound, _retry, to_iso
from scheduler.db.models import flavors

SIZES = ("memory_mb", "root_gb", "ephemeral_gb", "vcpus")


def _flavor(row: sa.RowMapping) -> dict[str, Any]:
    return {
        "name": row["name"],
        **{key: row[key] for key in SIZES},
        "extra_specs": dict(row["extra_specs"] or {}),
        "created_at": to_iso(row["created_at"]),
        "updated_at": to_iso(row["updated_at"]),
    }


class FlavorQueries(DatabaseEngine):
    """Flavors by name. Callers (scheduler.admin.flavors) check sizes and specs first; these
    raise NotFound / Conflict for what only the database can tell."""

    @_retry
    def list_flavors(self) -> list[dict[str, Any]]:
        """[{name, memory_mb, root_gb, ephemeral_gb, vcpus, extra_specs, created_at, updated_at}],
        by name."""
        with self._transaction() as connection:
            rows = connection.execute(sa.select(flavors).order_by(flavors.c.name)).mappings().all()
        return [_flavor(row) for row in rows]

    @_retry
    def get_flavor(self, name: str) -> dict[str, Any]:
        with self._transaction() as connection:
            row = connection.execute(sa.select(flavors).where(flavors.c.name == name)).mappings().first()
            if row is None:
                known = connection.execute(sa.select(flavors.c.name)).scalars().all()
        if row is None:
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.7) if isinstance(name, str) else []
            raise NotFound(f"no flavor named {name!r}" + (f": did you mean {near[0]!r}?" if near else ""))
        return _flavor(row)

    @_retry
    def create_flavor(self, flavor: Mapping[str, Any]) -> dict[str, Any]:
        """Insert ``flavor`` ({name, the SIZES, extra_specs}); Conflict when the name is taken."""
        now = self.now()
        row = {"name": flavor["name"], **{key: flavor.get(key, 0) for key in SIZES},
               "extra_specs": dict(flavor.get("extra_specs") or {}), "created_at": now, "updated_at": now}
        try:
            with self._transaction(write=True) as connection:
                connection.execute(flavors.insert(), [row])
        except sa_exc.IntegrityError:
            raise Conflict(f"a flavor named {flavor['name']!r} exists already") from None
        return self.get_flavor(flavor["name"])

    @_retry
    def update_flavor_extra_specs(self, name: str, set_specs: Mapping[str, str] | None = None,
                                  unset: Iterable[str] = ()) -> dict[str, Any]:
        """Merge ``set_specs`` into the flavor's extra specs and remove the keys ``unset``;
        NotFound naming a key to unset that the flavor does not have (nothing changed)."""
        unset = list(unset)
        with self._transaction(write=True) as connection:
            row = connection.execute(sa.select(flavors).where(flavors.c.name == name)).mappings().first()
            if row is None:
                raise NotFound(f"no flavor named {name!r}")
            specs = dict(row["extra_specs"] or {})
            missing = [key for key in unset if key not in specs]
            if missing:
                raise NotFound(f"flavor {name!r} has no property {', '.join(map(repr, missing))}")
            for key in unset:
                del specs[key]
            specs.update(set_specs or {})
            connection.execute(sa.update(flavors).where(flavors.c.id == row["id"])
                               .values(extra_specs=specs, updated_at=self.now()))
        return self.get_flavor(name)

    @_retry
    def delete_flavor(self, name: str) -> None:
        with self._transaction(write=True) as connection:
            if not connection.execute(sa.delete(flavors).where(flavors.c.name == name)).rowcount:
                raise NotFound(f"no flavor named {name!r}")
