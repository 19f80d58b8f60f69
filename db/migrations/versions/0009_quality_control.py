"""Study quality control (issue 24): a study's settings, qualification items, gold items and
attention checks with known answers and the annotators' answers to them, each annotator's
qualification and pause state, the study's reviewers, and reviewers' adjudicated values
(beside the raw ratings, never over them).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""
from alembic import op
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('study_participants',
    sa.Column('collection_id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('qualification', sa.String(length=10), nullable=True),
    sa.Column('qualification_score', sa.Float(), nullable=True),
    sa.Column('qualified_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('flagged_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('paused_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('pause_reason', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("qualification IS NULL OR qualification IN ('passed', 'failed')", name=op.f('ck_study_participants_qualification')),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_study_participants_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_study_participants_collection_id_collections'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('collection_id', 'annotator_id', name=op.f('pk_study_participants'))
    )
    op.create_table('study_reviewers',
    sa.Column('collection_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_study_reviewers_collection_id_collections'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_study_reviewers_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('collection_id', 'user_id', name=op.f('pk_study_reviewers'))
    )
    op.create_table('study_settings',
    sa.Column('collection_id', sa.Integer(), nullable=False),
    sa.Column('qualification_pass', sa.Float(), nullable=True),
    sa.Column('check_rate', sa.Float(), server_default='0', nullable=False),
    sa.Column('accuracy_threshold', sa.Float(), nullable=True),
    sa.Column('min_checks', sa.Integer(), server_default='3', nullable=False),
    sa.Column('pause_flagged', sa.Boolean(), server_default='0', nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('accuracy_threshold IS NULL OR (accuracy_threshold >= 0 AND accuracy_threshold <= 1)', name=op.f('ck_study_settings_accuracy_threshold')),
    sa.CheckConstraint('check_rate IS NULL OR (check_rate >= 0 AND check_rate <= 1)', name=op.f('ck_study_settings_check_rate')),
    sa.CheckConstraint('qualification_pass IS NULL OR (qualification_pass >= 0 AND qualification_pass <= 1)', name=op.f('ck_study_settings_qualification_pass')),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_study_settings_collection_id_collections'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('collection_id', name=op.f('pk_study_settings'))
    )
    op.create_table('adjudications',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('collection_id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.Column('reviewer_id', sa.Integer(), nullable=True),
    sa.Column('overall', sa.Float(), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('ratings_seen', sa.Integer(), nullable=False),
    sa.Column('spread', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('overall IS NULL OR (overall >= 0 AND overall <= 1)', name=op.f('ck_adjudications_overall')),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_adjudications_caption_id_captions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_adjudications_collection_id_collections'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['reviewer_id'], ['users.id'], name=op.f('fk_adjudications_reviewer_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_adjudications')),
    sa.UniqueConstraint('collection_id', 'caption_id', name=op.f('uq_adjudications_collection_id_caption_id'))
    )
    with op.batch_alter_table('adjudications', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_adjudications_caption_id'), ['caption_id'], unique=False)

    op.create_table('check_items',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('collection_id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('expected_overall', sa.Float(), nullable=False),
    sa.Column('tolerance', sa.Float(), nullable=False),
    sa.Column('instruction', sa.Text(), nullable=True),
    sa.Column('explanation', sa.Text(), nullable=True),
    sa.Column('created_by_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("kind IN ('qualification', 'gold', 'attention')", name=op.f('ck_check_items_kind')),
    sa.CheckConstraint('expected_overall IS NULL OR (expected_overall >= 0 AND expected_overall <= 1)', name=op.f('ck_check_items_expected_overall')),
    sa.CheckConstraint('tolerance IS NULL OR (tolerance >= 0 AND tolerance <= 1)', name=op.f('ck_check_items_tolerance')),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_check_items_caption_id_captions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_check_items_collection_id_collections'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], name=op.f('fk_check_items_created_by_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_check_items')),
    sa.UniqueConstraint('caption_id', name=op.f('uq_check_items_caption_id'))
    )
    with op.batch_alter_table('check_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_check_items_collection_id'), ['collection_id'], unique=False)

    op.create_table('check_answers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('check_item_id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('phase', sa.String(length=20), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('overall', sa.Float(), nullable=False),
    sa.Column('expected', sa.Float(), nullable=False),
    sa.Column('tolerance', sa.Float(), nullable=False),
    sa.Column('passed', sa.Boolean(), nullable=False),
    sa.Column('seconds', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("phase IN ('qualification', 'queue')", name=op.f('ck_check_answers_phase')),
    sa.CheckConstraint('overall IS NULL OR (overall >= 0 AND overall <= 1)', name=op.f('ck_check_answers_overall')),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_check_answers_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['check_item_id'], ['check_items.id'], name=op.f('fk_check_answers_check_item_id_check_items'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_check_answers')),
    sa.UniqueConstraint('check_item_id', 'annotator_id', 'attempt', name=op.f('uq_check_answers_check_item_id_annotator_id_attempt'))
    )
    with op.batch_alter_table('check_answers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_check_answers_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_check_answers_check_item_id'), ['check_item_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('check_answers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_check_answers_check_item_id'))
        batch_op.drop_index(batch_op.f('ix_check_answers_annotator_id'))

    op.drop_table('check_answers')
    with op.batch_alter_table('check_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_check_items_collection_id'))

    op.drop_table('check_items')
    with op.batch_alter_table('adjudications', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_adjudications_caption_id'))

    op.drop_table('adjudications')
    op.drop_table('study_settings')
    op.drop_table('study_reviewers')
    op.drop_table('study_participants')
