"""An index on captions (image_id, kind, language): a rating screen reads its image's references
in one language for every item, and with thousands of candidates on one image (a perturbation
study) the image_id index alone made that a scan of all of them (5 ms of a 9 ms next_item with
10,000 captions per image, issue 28).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""
from alembic import op


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_captions_image_id_kind_language', 'captions', ['image_id', 'kind', 'language'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_captions_image_id_kind_language', table_name='captions')
