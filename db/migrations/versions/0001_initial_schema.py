"""Initial schema: users, collections, images, captions, annotations, ratings, scores.

Revision ID: 0001
Revises: 
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('role', sa.String(length=20), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("role IN ('annotator', 'researcher', 'admin')", name=op.f('ck_users_role')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_users')),
    sa.UniqueConstraint('name', name=op.f('uq_users_name'))
    )
    op.create_table('collections',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], name=op.f('fk_collections_created_by_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_collections')),
    sa.UniqueConstraint('name', name=op.f('uq_collections_name'))
    )
    op.create_table('imports',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('format', sa.String(length=20), nullable=False),
    sa.Column('source_name', sa.String(length=500), nullable=False),
    sa.Column('source_sha256', sa.String(length=64), nullable=False),
    sa.Column('collection_id', sa.Integer(), nullable=True),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('counts', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_imports_collection_id_collections'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_imports_user_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_imports'))
    )
    op.create_table('images',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('format', sa.String(length=10), nullable=False),
    sa.Column('width', sa.Integer(), nullable=False),
    sa.Column('height', sa.Integer(), nullable=False),
    sa.Column('size_bytes', sa.Integer(), nullable=False),
    sa.Column('original_filename', sa.String(length=500), nullable=True),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.Column('import_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['import_id'], ['imports.id'], name=op.f('fk_images_import_id_imports'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_images')),
    sa.UniqueConstraint('sha256', name=op.f('uq_images_sha256'))
    )
    with op.batch_alter_table('images', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_images_external_id'), ['external_id'], unique=False)

    op.create_table('captions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('image_id', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('language', sa.String(length=16), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('source_model', sa.String(length=200), nullable=True),
    sa.Column('parent_id', sa.Integer(), nullable=True),
    sa.Column('perturbation_op', sa.String(length=40), nullable=True),
    sa.Column('perturbation', sa.JSON(), nullable=True),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.Column('import_id', sa.Integer(), nullable=True),
    sa.Column('created_by_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("kind IN ('reference', 'candidate', 'perturbed', 'transcreated')", name=op.f('ck_captions_kind')),
    sa.ForeignKeyConstraint(['created_by_id'], ['users.id'], name=op.f('fk_captions_created_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['image_id'], ['images.id'], name=op.f('fk_captions_image_id_images'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['import_id'], ['imports.id'], name=op.f('fk_captions_import_id_imports'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['parent_id'], ['captions.id'], name=op.f('fk_captions_parent_id_captions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_captions'))
    )
    with op.batch_alter_table('captions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_captions_external_id'), ['external_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_captions_image_id'), ['image_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_captions_import_id'), ['import_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_captions_parent_id'), ['parent_id'], unique=False)

    op.create_table('collection_captions',
    sa.Column('collection_id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_collection_captions_caption_id_captions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'], name=op.f('fk_collection_captions_collection_id_collections'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('collection_id', 'caption_id', name=op.f('pk_collection_captions'))
    )
    with op.batch_alter_table('collection_captions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_collection_captions_caption_id'), ['caption_id'], unique=False)

    op.create_table('critical_annotations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('critical_objects', sa.JSON(), nullable=False),
    sa.Column('backgrounds', sa.JSON(), nullable=False),
    sa.Column('relationships', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_critical_annotations_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_critical_annotations_caption_id_captions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_critical_annotations')),
    sa.UniqueConstraint('caption_id', 'annotator_id', name=op.f('uq_critical_annotations_caption_id_annotator_id'))
    )
    with op.batch_alter_table('critical_annotations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_critical_annotations_caption_id'), ['caption_id'], unique=False)

    op.create_table('metric_scores',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.Column('metric', sa.String(length=40), nullable=False),
    sa.Column('checkpoint_fingerprint', sa.String(length=128), nullable=False),
    sa.Column('value', sa.Float(), nullable=True),
    sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_metric_scores_caption_id_captions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_metric_scores')),
    sa.UniqueConstraint('caption_id', 'metric', 'checkpoint_fingerprint', name=op.f('uq_metric_scores_caption_id_metric_checkpoint_fingerprint'))
    )
    with op.batch_alter_table('metric_scores', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_metric_scores_caption_id'), ['caption_id'], unique=False)

    op.create_table('queue_skips',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.Column('task', sa.String(length=20), nullable=False),
    sa.Column('language', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("task IN ('rating', 'transcreation', 'critical')", name=op.f('ck_queue_skips_task')),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_queue_skips_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_queue_skips_caption_id_captions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_queue_skips')),
    sa.UniqueConstraint('annotator_id', 'caption_id', 'task', 'language', name=op.f('uq_queue_skips_annotator_id_caption_id_task_language'))
    )
    op.create_table('ratings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('overall', sa.Float(), nullable=False),
    sa.Column('fluency', sa.Float(), nullable=True),
    sa.Column('relevance', sa.Float(), nullable=True),
    sa.Column('descriptiveness', sa.Float(), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('import_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('descriptiveness IS NULL OR (descriptiveness >= 0 AND descriptiveness <= 1)', name=op.f('ck_ratings_descriptiveness')),
    sa.CheckConstraint('fluency IS NULL OR (fluency >= 0 AND fluency <= 1)', name=op.f('ck_ratings_fluency')),
    sa.CheckConstraint('overall IS NULL OR (overall >= 0 AND overall <= 1)', name=op.f('ck_ratings_overall')),
    sa.CheckConstraint('relevance IS NULL OR (relevance >= 0 AND relevance <= 1)', name=op.f('ck_ratings_relevance')),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_ratings_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_ratings_caption_id_captions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['import_id'], ['imports.id'], name=op.f('fk_ratings_import_id_imports'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_ratings')),
    sa.UniqueConstraint('caption_id', 'annotator_id', name=op.f('uq_ratings_caption_id_annotator_id'))
    )
    with op.batch_alter_table('ratings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ratings_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_ratings_caption_id'), ['caption_id'], unique=False)

    op.create_table('transcreations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('source_caption_id', sa.Integer(), nullable=False),
    sa.Column('result_caption_id', sa.Integer(), nullable=False),
    sa.Column('target_language', sa.String(length=16), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('source_score', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('source_score IS NULL OR (source_score >= 0 AND source_score <= 1)', name=op.f('ck_transcreations_source_score')),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_transcreations_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['result_caption_id'], ['captions.id'], name=op.f('fk_transcreations_result_caption_id_captions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['source_caption_id'], ['captions.id'], name=op.f('fk_transcreations_source_caption_id_captions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_transcreations')),
    sa.UniqueConstraint('result_caption_id', name=op.f('uq_transcreations_result_caption_id')),
    sa.UniqueConstraint('source_caption_id', 'target_language', 'annotator_id', name=op.f('uq_transcreations_source_caption_id_target_language_annotator_id'))
    )
    with op.batch_alter_table('transcreations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_transcreations_source_caption_id'), ['source_caption_id'], unique=False)

    op.create_table('rating_revisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rating_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('overall', sa.Float(), nullable=False),
    sa.Column('fluency', sa.Float(), nullable=True),
    sa.Column('relevance', sa.Float(), nullable=True),
    sa.Column('descriptiveness', sa.Float(), nullable=True),
    sa.Column('valid_from', sa.DateTime(timezone=True), nullable=False),
    sa.Column('replaced_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['rating_id'], ['ratings.id'], name=op.f('fk_rating_revisions_rating_id_ratings'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rating_revisions')),
    sa.UniqueConstraint('rating_id', 'version', name=op.f('uq_rating_revisions_rating_id_version'))
    )


def downgrade() -> None:
    op.drop_table('rating_revisions')
    with op.batch_alter_table('transcreations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_transcreations_source_caption_id'))

    op.drop_table('transcreations')
    with op.batch_alter_table('ratings', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ratings_caption_id'))
        batch_op.drop_index(batch_op.f('ix_ratings_annotator_id'))

    op.drop_table('ratings')
    op.drop_table('queue_skips')
    with op.batch_alter_table('metric_scores', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_metric_scores_caption_id'))

    op.drop_table('metric_scores')
    with op.batch_alter_table('critical_annotations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_critical_annotations_caption_id'))

    op.drop_table('critical_annotations')
    with op.batch_alter_table('collection_captions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_collection_captions_caption_id'))

    op.drop_table('collection_captions')
    with op.batch_alter_table('captions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_captions_parent_id'))
        batch_op.drop_index(batch_op.f('ix_captions_import_id'))
        batch_op.drop_index(batch_op.f('ix_captions_image_id'))
        batch_op.drop_index(batch_op.f('ix_captions_external_id'))

    op.drop_table('captions')
    with op.batch_alter_table('images', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_images_external_id'))

    op.drop_table('images')
    op.drop_table('imports')
    op.drop_table('collections')
    op.drop_table('users')
