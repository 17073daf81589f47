"""The initial schema: instances, compute_nodes, services.

Revision ID: 0001
Revises:
Create Date: 2024-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Naive UTC; MySQL keeps microseconds only when asked. Frozen here on purpose:
# a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.create_table(
        "instances",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
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
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("fault_reason", sa.Text, nullable=True),
        sa.Column("fault_details", sa.Text, nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.Column("scheduled_at", Timestamp, nullable=True),
        sa.Column("launched_at", Timestamp, nullable=True),
        sa.Column("deleted_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_instances"),
    )
    op.create_index("ix_instances_uuid", "instances", ["uuid"], unique=True)
    op.create_index("ix_instances_host", "instances", ["host"])
    op.create_index("ix_instances_state", "instances", ["state"])

    op.create_table(
        "compute_nodes",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("nodename", sa.String(255), nullable=True),
        sa.Column("hypervisor_type", sa.String(255), nullable=True),
        sa.Column("memory_mb", sa.Integer, nullable=False),
        sa.Column("memory_mb_used", sa.Integer, nullable=False),
        sa.Column("free_ram_mb", sa.Integer, nullable=False),
        sa.Column("local_gb", sa.Integer, nullable=False),
        sa.Column("local_gb_used", sa.Double, nullable=False),
        sa.Column("free_disk_gb", sa.Double, nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("vcpus_used", sa.Double, nullable=False),
        sa.Column("running_vms", sa.Integer, nullable=False),
        sa.Column("stats", sa.JSON, nullable=True),
        sa.Column("reported_at", Timestamp, nullable=True),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_compute_nodes"),
        sa.UniqueConstraint("host", name="uq_compute_nodes_host"),
    )

    op.create_table(
        "services",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("binary", sa.String(255), nullable=False),
        sa.Column("topic", sa.String(255), nullable=True),
        sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("disabled_reason", sa.String(255), nullable=True),
        sa.Column("last_seen_at", Timestamp, nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_services"),
        sa.UniqueConstraint("host", "binary", name="uq_services_host_binary"),
    )


def downgrade():
    op.drop_table("services")
    op.drop_table("compute_nodes")
    op.drop_index("ix_instances_state", table_name="instances")
    op.drop_index("ix_instances_host", table_name="instances")
    op.drop_index("ix_instances_uuid", table_name="instances")
    op.drop_table("instances")
