"""Request ids: the request each instance was booted by, as every process logged it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    # req-<uuid4>: 40 characters (scheduler.rpc.context).
    op.add_column("instances", sa.Column("request_id", sa.String(40), nullable=True))
    op.add_column("shadow_instances", sa.Column("request_id", sa.String(40), nullable=True))


def downgrade():
    op.drop_column("shadow_instances", "request_id")
    op.drop_column("instances", "request_id")
