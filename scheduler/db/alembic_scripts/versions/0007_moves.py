"""Moves: the instance's other host while it moves, and the migrations table.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# Frozen here on purpose: a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.add_column("instances", sa.Column("move_host", sa.String(255), nullable=True))
    op.create_index("ix_instances_move_host", "instances", ["move_host"])
    op.add_column("shadow_instances", sa.Column("move_host", sa.String(255), nullable=True))
    op.create_table(
        "migrations",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("source_host", sa.String(255), nullable=True),
        sa.Column("source_node", sa.String(255), nullable=True),
        sa.Column("dest_host", sa.String(255), nullable=True),
        sa.Column("dest_node", sa.String(255), nullable=True),
        sa.Column("old_flavor", sa.JSON, nullable=True),
        sa.Column("new_flavor", sa.JSON, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.Column("finished_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_migrations"),
    )
    for column in ("instance_uuid", "status", "source_host", "dest_host"):
        op.create_index(f"ix_migrations_{column}", "migrations", [column])


def downgrade():
    op.drop_table("migrations")
    op.drop_column("shadow_instances", "move_host")
    op.drop_index("ix_instances_move_host", table_name="instances")
    op.drop_column("instances", "move_host")
