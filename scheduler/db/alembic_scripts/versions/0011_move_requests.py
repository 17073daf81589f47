"""Move requests: what a move's destination is told, kept with the move so that it can be told
again until its agent's word shows it heard.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("migrations", sa.Column("request", sa.JSON(), nullable=True))


def downgrade():
    op.drop_column("migrations", "request")
