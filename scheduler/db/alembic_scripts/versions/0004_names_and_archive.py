"""Instance names, service versions, and the shadow tables ``berth-manage db archive`` moves
old rows into.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# Frozen here on purpose: a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.add_column("instances", sa.Column("display_name", sa.String(255), nullable=True))
    op.create_index("ix_instances_display_name", "instances", ["display_name"])
    op.add_column("services", sa.Column("version", sa.String(64), nullable=True))

    # The instances' columns as they are after this revision; no index but the key.
    op.create_table(
        "shadow_instances",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("node", sa.String(255), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("flavor_name", sa.String(255), nullable=True),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("root_gb", sa.Integer, nullable=False),
        sa.Column("ephemeral_gb", sa.Integer, nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("request_spec", sa.JSON, nullable=True),
        sa.Column("filter_properties", sa.JSON, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("fault_reason", sa.Text, nullable=True),
        sa.Column("fault_details", sa.Text, nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.Column("scheduled_at", Timestamp, nullable=True),
        sa.Column("launched_at", Timestamp, nullable=True),
        sa.Column("deleted_at", Timestamp, nullable=True),
        sa.Column("display_name", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_shadow_instances"),
    )
    op.create_table(
        "shadow_server_group_members",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_shadow_server_group_members"),
    )


def downgrade():
    op.drop_table("shadow_server_group_members")
    op.drop_table("shadow_instances")
    op.drop_column("services", "version")
    op.drop_index("ix_instances_display_name", table_name="instances")
    op.drop_column("instances", "display_name")
