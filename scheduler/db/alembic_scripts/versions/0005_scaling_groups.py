"""Scaling groups: the groups, their history, and each member instance's group.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Frozen here on purpose: a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.add_column("instances", sa.Column("scaling_group_uuid", sa.String(36), nullable=True))
    op.create_index("ix_instances_scaling_group_uuid", "instances", ["scaling_group_uuid"])
    # berth-manage db archive copies every column of an instance.
    op.add_column("shadow_instances", sa.Column("scaling_group_uuid", sa.String(36), nullable=True))

    op.create_table(
        "scaling_groups",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=True),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("template", sa.JSON, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("desired", sa.Integer, nullable=False),
        sa.Column("status", sa.JSON, nullable=True),
        sa.Column("last_synced_at", Timestamp, nullable=True),
        sa.Column("replace_after", Timestamp, nullable=True),
        sa.Column("replace_failures", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("lease_owner", sa.String(255), nullable=True),
        sa.Column("lease_expires_at", Timestamp, nullable=True),
        sa.Column("version", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.Column("deleted_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_scaling_groups"),
        sa.UniqueConstraint("name", name="uq_scaling_groups_name"),
    )
    op.create_index("ix_scaling_groups_uuid", "scaling_groups", ["uuid"], unique=True)
    op.create_table(
        "scaling_group_recommendations",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("recorded_at", Timestamp, nullable=False),
        sa.Column("replicas", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_scaling_group_recommendations"),
        sa.ForeignKeyConstraint(["group_id"], ["scaling_groups.id"], ondelete="CASCADE",
                                name="fk_scaling_group_recommendations_group_id_scaling_groups"),
    )
    op.create_index("ix_scaling_group_recommendations_recorded_at", "scaling_group_recommendations",
                    ["recorded_at"])
    op.create_index("ix_scaling_group_recommendations_group_id_recorded_at", "scaling_group_recommendations",
                    ["group_id", "recorded_at"])
    op.create_table(
        "scaling_group_events",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("recorded_at", Timestamp, nullable=False),
        sa.Column("change", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_scaling_group_events"),
        sa.ForeignKeyConstraint(["group_id"], ["scaling_groups.id"], ondelete="CASCADE",
                                name="fk_scaling_group_events_group_id_scaling_groups"),
    )
    op.create_index("ix_scaling_group_events_recorded_at", "scaling_group_events", ["recorded_at"])
    op.create_index("ix_scaling_group_events_group_id_recorded_at", "scaling_group_events",
                    ["group_id", "recorded_at"])

def downgrade():
    op.drop_table("scaling_group_events")
    op.drop_table("scaling_group_recommendations")
    op.drop_index("ix_scaling_groups_uuid", table_name="scaling_groups")
    op.drop_table("scaling_groups")
    op.drop_column("shadow_instances", "scaling_group_uuid")
    op.drop_index("ix_instances_scaling_group_uuid", table_name="instances")
    op.drop_column("instances", "scaling_group_uuid")
