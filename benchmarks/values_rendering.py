"""The VALUES list of a batch of new instances, as the PostgreSQL fast path renders it
(scheduler.db.fastpaths: NULLs, non-negative ints and naive datetimes by Berth, the rest by
psycopg2) and with psycopg2 rendering every value, alternated in one process: CPU per row.
Needs a reachable PostgreSQL (tests/fixtures.py's PG_ADMIN_DSN and PG_URL).

``python -m benchmarks.values_rendering [--rows N] [--rounds R]``
"""

import argparse
import datetime
import statistics
import sys
import time
import uuid

import sqlalchemy as sa

from scheduler.db import fastpaths, models
from scheduler.utils import jsonutils
from tests.fixtures import temporary_database

SPEC = {"num_instances": 1, "instance_properties": {}, "image": {},
        "instance_type": {"name": "m1.small", "memory_mb": 2048, "root_gb": 20, "vcpus": 1, "ephemeral_gb": 0,
                          "extra_specs": {}}}


def _psycopg2_renders_all(connection, table, columns, rows):
    """The fast path as it was: one psycopg2 placeholder per value."""
    from psycopg2.extensions import encodings

    dialect = connection.dialect
    processors = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in columns]
    cursor = connection.connection.dbapi_connection.cursor()
    try:
        template = "(" + ", ".join(["%s"] * len(columns)) + ")"
        return b", ".join(
            cursor.mogrify(template, [row[name] if process is None else process(row[name])
                                      for name, process in zip(columns, processors, strict=True)])
            for row in rows).decode(encodings[cursor.connection.encoding])
    finally:
        cursor.close()


def _rows(count):
    """Rows as the scheduler writes placed instances: every column, the same now."""
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    rows = []
    for _ in range(count):
        instance_uuid = str(uuid.uuid4())
        row = {name: None for name in models.instances.c.keys() if name != "id"}
        row.update(uuid=instance_uuid, host="sim-000042", node="sim-000042", state="BUILDING",
                   flavor_name="m1.small", memory_mb=2048, root_gb=20, ephemeral_gb=0, vcpus=1,
                   request_spec=dict(SPEC, instance_uuids=[instance_uuid]),
                   filter_properties={"retry": {"num_attempts": 1, "hosts": []},
                                      "limits": {"memory_mb": 262144.0, "disk_gb": 8000.0, "vcpu": 256.0}},
                   attempts=1, created_at=now, updated_at=now, scheduled_at=now,
                   request_id=f"req-{uuid.uuid4()}")
        rows.append(row)
    return rows


def measure(count=512, rounds=21):
    """{way: [microseconds of CPU per row, one per round]}."""
    ways = {"psycopg2 renders every value": _psycopg2_renders_all,
            "the fast path (Berth renders NULLs, ints, datetimes)": fastpaths._rendered_values}
    with temporary_database(prefix="berth_bench") as url:
        engine = sa.create_engine(url, json_serializer=jsonutils.dumps, json_deserializer=jsonutils.loads)
        try:
            with engine.connect() as connection:
                rows = _rows(count)
                columns = list(rows[0])
                rendered = {way(connection, models.instances, columns, rows) for way in ways.values()}
                if len(rendered) != 1:
                    raise AssertionError("the two ways render different VALUES lists")
                spent = {name: [] for name in ways}
                for _ in range(rounds):
                    for name, way in ways.items():
                        start = time.process_time()
                        way(connection, models.instances, columns, rows)
                        spent[name].append((time.process_time() - start) / count * 1e6)
        finally:
            engine.dispose()
    return spent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=512, help="rows per batch (the bench's batch_size)")
    parser.add_argument("--rounds", type=int, default=21, help="rounds, each way once per round")
    args = parser.parse_args(argv)
    for name, spent in measure(args.rows, args.rounds).items():
        low, _, high = statistics.quantiles(spent, n=4)
        print(f"{name}: median {statistics.median(spent):.2f} us of CPU per row (IQR {low:.2f}-{high:.2f}; "
              f"{args.rounds} rounds of {args.rows} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
