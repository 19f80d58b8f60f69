"""A collection's study guidelines (Markdown), shown to annotators before their first item and
reachable from every item.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('collections', schema=None) as batch_op:
        batch_op.add_column(sa.Column('guidelines', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('collections', schema=None) as batch_op:
        batch_op.drop_column('guidelines')
