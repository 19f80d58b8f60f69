"""Rating leases (the k-ratings cap under concurrency) and import staging tables (imports
commit in batches into staging, then publish in one short transaction).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('import_stagings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('source_name', sa.String(length=500), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_import_stagings_user_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_import_stagings'))
    )
    with op.batch_alter_table('import_stagings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_import_stagings_updated_at'), ['updated_at'], unique=False)

    op.create_table('staged_captions',
    sa.Column('staging_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('image_sha256', sa.String(length=64), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('language', sa.String(length=16), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('source_model', sa.String(length=200), nullable=True),
    sa.Column('parent_seq', sa.Integer(), nullable=True),
    sa.Column('parent_caption_id', sa.Integer(), nullable=True),
    sa.Column('perturbation_op', sa.String(length=40), nullable=True),
    sa.Column('perturbation', sa.JSON(), nullable=True),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.ForeignKeyConstraint(['staging_id'], ['import_stagings.id'], name=op.f('fk_staged_captions_staging_id_import_stagings'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('staging_id', 'seq', name=op.f('pk_staged_captions'))
    )
    op.create_table('staged_critical',
    sa.Column('staging_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('caption_seq', sa.Integer(), nullable=False),
    sa.Column('annotator', sa.String(length=100), nullable=False),
    sa.Column('critical_objects', sa.JSON(), nullable=False),
    sa.Column('backgrounds', sa.JSON(), nullable=False),
    sa.Column('relationships', sa.JSON(), nullable=False),
    sa.Column('spans', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['staging_id'], ['import_stagings.id'], name=op.f('fk_staged_critical_staging_id_import_stagings'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('staging_id', 'seq', name=op.f('pk_staged_critical'))
    )
    op.create_table('staged_images',
    sa.Column('staging_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('format', sa.String(length=10), nullable=False),
    sa.Column('width', sa.Integer(), nullable=False),
    sa.Column('height', sa.Integer(), nullable=False),
    sa.Column('size_bytes', sa.Integer(), nullable=False),
    sa.Column('original_filename', sa.String(length=500), nullable=True),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.ForeignKeyConstraint(['staging_id'], ['import_stagings.id'], name=op.f('fk_staged_images_staging_id_import_stagings'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('staging_id', 'seq', name=op.f('pk_staged_images'))
    )
    with op.batch_alter_table('staged_images', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_staged_images_sha256'), ['sha256'], unique=False)

    op.create_table('staged_ratings',
    sa.Column('staging_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('caption_seq', sa.Integer(), nullable=False),
    sa.Column('annotator', sa.String(length=100), nullable=False),
    sa.Column('overall', sa.Float(), nullable=False),
    sa.Column('fluency', sa.Float(), nullable=True),
    sa.Column('relevance', sa.Float(), nullable=True),
    sa.Column('descriptiveness', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['staging_id'], ['import_stagings.id'], name=op.f('fk_staged_ratings_staging_id_import_stagings'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('staging_id', 'seq', name=op.f('pk_staged_ratings'))
    )
    op.create_table('rating_leases',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('caption_id', sa.Integer(), nullable=False),
    sa.Column('annotator_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['annotator_id'], ['users.id'], name=op.f('fk_rating_leases_annotator_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['caption_id'], ['captions.id'], name=op.f('fk_rating_leases_caption_id_captions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rating_leases')),
    sa.UniqueConstraint('caption_id', 'annotator_id', name=op.f('uq_rating_leases_caption_id_annotator_id'))
    )
    with op.batch_alter_table('rating_leases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rating_leases_annotator_id'), ['annotator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_rating_leases_caption_id'), ['caption_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_rating_leases_expires_at'), ['expires_at'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('rating_leases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rating_leases_expires_at'))
        batch_op.drop_index(batch_op.f('ix_rating_leases_caption_id'))
        batch_op.drop_index(batch_op.f('ix_rating_leases_annotator_id'))

    op.drop_table('rating_leases')
    op.drop_table('staged_ratings')
    with op.batch_alter_table('staged_images', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_staged_images_sha256'))

    op.drop_table('staged_images')
    op.drop_table('staged_critical')
    op.drop_table('staged_captions')
    with op.batch_alter_table('import_stagings', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_import_stagings_updated_at'))

    op.drop_table('import_stagings')
