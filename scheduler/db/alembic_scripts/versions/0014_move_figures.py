"""Move figures: what the source's driver measured of a live migration (its downtime, the time its
memory took to go over, the memory sent), told with its migrated step (scheduler API 1.7).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("migrations", sa.Column("figures", sa.JSON(), nullable=True))


def downgrade():
    op.drop_column("migrations", "figures")
