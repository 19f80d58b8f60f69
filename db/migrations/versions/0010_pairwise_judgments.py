"""Pairwise judgments (issue 24): pairs of captions of one image that a study's annotators
compare (A, B or tie, shown in a blind left/right order), and their judgments, offers and skips.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('pairwise_items',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('collection_id', sa.Integer(), nullable=False),
    sa.Column('caption_a_id', sa.Integer(), nullable=False),
    sa.Column('caption_b_id', sa.Integer(), nullable=False),
    sa.Column('category', sa.String(length=2), nullable=False),
    sa.Column('created_by_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("caption_a_id <> caption_b_id", name=op.f('ck_pairwise_items_two_captions')),
    sa.CheckConstraint("category IN ('HC', 'HI', 'HM', 'MM')", name=op.f('ck_pairwise_items_category')),
    sa.ForeignKeyConstraint(['caption_a_id'], ['captions.id'], name=op.f('fk_pairwise_items_caption_a_id_captions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['caption_b_id'], ['captions.id'], name=op.f('fk_pairwise_items_caption_b_id_captions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_pairwise_items_collection_id_collections'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], name=op.f('fk_pairwise_items_created_by_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pairwise_items')),
    sa.UniqueConstraint('collection_id', 'caption_a_id', 'caption_b_id', name=op.f('uq_pairwise_items_collection_id_caption_a_id_caption_b_id'))
    )
    with op.batch_alter_table('pairwise_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pairwise_items_caption_a_id'), ['caption_a_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_pairwise_items_caption_b_id'), ['caption_b_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_pairwise_items_collection_id'), ['collection_id'], unique=False)

    op.create_table('pairwise_judgments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('choice', sa.String(length=4), nullable=True),
    sa.Column('a_left', sa.Boolean(), nullable=False),
    sa.Column('offered_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('seconds', sa.Float(), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.CheckConstraint("choice IS NULL OR choice IN ('a', 'b', 'tie', 'skip')", name=op.f('ck_pairwise_judgments_choice')),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_pairwise_judgments_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['item_id'], ['pairwise_items.id'], name=op.f('fk_pairwise_judgments_item_id_pairwise_items'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_pairwise_judgments')),
    sa.UniqueConstraint('item_id', 'annotator_id', name=op.f('uq_pairwise_judgments_item_id_annotator_id'))
    )
    with op.batch_alter_table('pairwise_judgments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pairwise_judgments_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_pairwise_judgments_expires_at'), ['expires_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_pairwise_judgments_item_id'), ['item_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('pairwise_judgments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pairwise_judgments_item_id'))
        batch_op.drop_index(batch_op.f('ix_pairwise_judgments_expires_at'))
        batch_op.drop_index(batch_op.f('ix_pairwise_judgments_annotator_id'))

    op.drop_table('pairwise_judgments')
    with op.batch_alter_table('pairwise_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pairwise_items_collection_id'))
        batch_op.drop_index(batch_op.f('ix_pairwise_items_caption_b_id'))
        batch_op.drop_index(batch_op.f('ix_pairwise_items_caption_a_id'))

    op.drop_table('pairwise_items')
