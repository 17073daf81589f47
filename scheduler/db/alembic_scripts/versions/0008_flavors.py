"""Flavors: named sizes and extra specs, the classic m1 set to start with.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Frozen here on purpose: a migration must not change when models.py (or the FLAVORS the CLI
# once knew, scheduler.policy.flavors) does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
CLASSIC = (
    ("m1.tiny", 512, 1, 0, 1),
    ("m1.small", 2048, 20, 0, 1),
    ("m1.medium", 4096, 40, 0, 2),
    ("m1.large", 8192, 80, 0, 4),
    ("m1.xlarge", 16384, 160, 0, 8),
)


def upgrade():
    flavors = op.create_table(
        "flavors",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("root_gb", sa.Integer, nullable=False),
        sa.Column("ephemeral_gb", sa.Integer, nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("extra_specs", sa.JSON, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_flavors"),
        sa.UniqueConstraint("name", name="uq_flavors_name"),
    )
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    op.bulk_insert(flavors, [
        {"name": name, "memory_mb": memory_mb, "root_gb": root_gb, "ephemeral_gb": ephemeral_gb,
         "vcpus": vcpus, "extra_specs": {}, "created_at": now, "updated_at": now}
        for name, memory_mb, root_gb, ephemeral_gb, vcpus in CLASSIC
    ])


def downgrade():
    op.drop_table("flavors")
