"""Host aggregates and server groups.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Frozen copy, as in 0001: a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.create_table(
        "aggregates",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("availability_zone", sa.String(255), nullable=True),
        sa.Column("metadata", sa.JSON, nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_aggregates"),
        sa.UniqueConstraint("name", name="uq_aggregates_name"),
    )
    op.create_table(
        "aggregate_hosts",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("aggregate_id", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_aggregate_hosts"),
        sa.ForeignKeyConstraint(
            ["aggregate_id"], ["aggregates.id"], ondelete="CASCADE",
            name="fk_aggregate_hosts_aggregate_id_aggregates",
        ),
        sa.UniqueConstraint("aggregate_id", "host", name="uq_aggregate_hosts_aggregate_id_host"),
    )
    op.create_index("ix_aggregate_hosts_host", "aggregate_hosts", ["host"])
    op.create_table(
        "server_groups",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=True),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("rules", sa.JSON, nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_server_groups"),
    )
    op.create_index("ix_server_groups_uuid", "server_groups", ["uuid"], unique=True)
    op.create_table(
        "server_group_members",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_server_group_members"),
        sa.ForeignKeyConstraint(
            ["group_id"], ["server_groups.id"], ondelete="CASCADE",
            name="fk_server_group_members_group_id_server_groups",
        ),
        sa.UniqueConstraint(
            "group_id", "instance_uuid", name="uq_server_group_members_group_id_instance_uuid"
        ),
    )
    op.create_index(
        "ix_server_group_members_instance_uuid", "server_group_members", ["instance_uuid"]
    )


def downgrade():
    op.drop_index("ix_server_group_members_instance_uuid", table_name="server_group_members")
    op.drop_table("server_group_members")
    op.drop_index("ix_server_groups_uuid", table_name="server_groups")
    op.drop_table("server_groups")
    op.drop_index("ix_aggregate_hosts_host", table_name="aggregate_hosts")
    op.drop_table("aggregate_hosts")
    op.drop_table("aggregates")
