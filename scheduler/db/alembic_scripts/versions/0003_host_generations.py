"""A generation per host, for schedulers' compare-and-set claims.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "host_generations",
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("generation", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("host", name="pk_host_generations"),
    )


def downgrade():
    op.drop_table("host_generations")
