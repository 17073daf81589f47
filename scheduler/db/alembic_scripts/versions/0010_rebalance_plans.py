"""Rebalance plans: saved plans of migrations and their steps, to be shown and applied.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# Frozen here on purpose: a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.create_table(
        "rebalance_plans",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("goal", sa.String(32), nullable=False),
        sa.Column("options", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_rebalance_plans"),
    )
    op.create_index("ix_rebalance_plans_state", "rebalance_plans", ["state"])
    op.create_table(
        "rebalance_steps",
        sa.Column("plan_id", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("source_host", sa.String(255), nullable=False),
        sa.Column("dest_host", sa.String(255), nullable=False),
        sa.Column("source_generation", sa.BigInteger, nullable=False),
        sa.Column("dest_generation", sa.BigInteger, nullable=False),
        sa.Column("memory_mb", sa.Double, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("migration_id", sa.Integer, nullable=True),
        sa.Column("failure", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("plan_id", "position", name="pk_rebalance_steps"),
        sa.ForeignKeyConstraint(["plan_id"], ["rebalance_plans.id"], ondelete="CASCADE",
                                name="fk_rebalance_steps_plan_id_rebalance_plans"),
    )


def downgrade():
    op.drop_table("rebalance_steps")
    op.drop_index("ix_rebalance_plans_state", table_name="rebalance_plans")
    op.drop_table("rebalance_plans")
