"""Instance metrics: the last sample of each metric of each instance, for the scaling groups.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Frozen here on purpose: a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.create_table(
        "instance_metrics",
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("sampled_at", Timestamp, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("instance_uuid", "name", name="pk_instance_metrics"),
    )
    op.create_index("ix_instance_metrics_sampled_at", "instance_metrics", ["sampled_at"])


def downgrade():
    op.drop_index("ix_instance_metrics_sampled_at", table_name="instance_metrics")
    op.drop_table("instance_metrics")
