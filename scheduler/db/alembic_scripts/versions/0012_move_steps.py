"""Move steps: a move between two agents (compute API 2.0) goes through steps, prepare on the
destination, migrate from the source, finish on the destination, each recorded with what the
source needs to hand the instance over (the destination's transfer).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("migrations", sa.Column("step", sa.String(16), nullable=True))
    op.add_column("migrations", sa.Column("transfer", sa.JSON(), nullable=True))


def downgrade():
    op.drop_column("migrations", "transfer")
    op.drop_column("migrations", "step")
