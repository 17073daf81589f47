"""Jobs: drains and rebalance plans carried on by the schedulers (scheduler.moves.jobs), each held
by one scheduler at a time by lease, and the steps of a drain.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Frozen here on purpose: a migration must not change when models.py does.
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade():
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("plan_id", sa.Integer, nullable=True),
        sa.Column("active_key", sa.String(300), nullable=True),
        sa.Column("live", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("max_parallel", sa.Integer, nullable=False),
        sa.Column("timeout", sa.Integer, nullable=True),
        sa.Column("deadline", Timestamp, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("lease_owner", sa.String(255), nullable=True),
        sa.Column("lease_expires_at", Timestamp, nullable=True),
        sa.Column("version", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.Column("finished_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.UniqueConstraint("active_key", name="uq_jobs_active_key"),
    )
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_index("ix_jobs_host", "jobs", ["host"])
    op.create_index("ix_jobs_plan_id", "jobs", ["plan_id"])
    op.create_table(
        "job_steps",
        sa.Column("job_id", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("migration_id", sa.Integer, nullable=True),
        sa.Column("dest_host", sa.String(255), nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("job_id", "position", name="pk_job_steps"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE",
                                name="fk_job_steps_job_id_jobs"),
    )


def downgrade():
    op.drop_table("job_steps")
    op.drop_index("ix_jobs_plan_id", table_name="jobs")
    op.drop_index("ix_jobs_host", table_name="jobs")
    op.drop_index("ix_jobs_state", table_name="jobs")
    op.drop_table("jobs")
