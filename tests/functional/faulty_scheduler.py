"""berth-scheduler with one fault injected, for the tests of what a rolled-back step
leaves behind: the rows of an instance whose project is POISON are refused by the
database, as a row no column can hold would be (the edge refuses every such row
Berth knows of, so the fault has to be made)."""

import sys

from sqlalchemy import exc as sa_exc

from scheduler.cmd import scheduler
from scheduler.db import api

POISON = "refused-by-the-database"
_create_instances = api.Database.create_instances


def create_instances(self, records):
    if any(record.get("project_id") == POISON for record in records):
        raise sa_exc.DataError("INSERT INTO instances", {}, ValueError(f"{POISON}: injected fault"))
    return _create_instances(self, records)


if __name__ == "__main__":
    api.Database.create_instances = create_instances
    sys.exit(scheduler.main())
