"""Collections say in which order their rating queue serves items (`least-rated`, the old
behaviour and the default, or `disagreement-first`).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('collections') as batch:
        batch.add_column(sa.Column('queue_order', sa.String(length=30), nullable=False, server_default='least-rated'))


def downgrade() -> None:
    with op.batch_alter_table('collections') as batch:
        batch.drop_column('queue_order')
