"""Unset the aspect ratings the Rate view stored without the annotator touching them, and
store critical objects as character spans.

Until this revision the Rate view's "Also rate fluency / relevance / descriptiveness" box was
on by default with its sliders at 0.5, so a rating given with the keyboard (or without moving
those sliders) stored 0.5 for all three aspects. Which input an annotator used was never
recorded, so the rule uses the best evidence there is: a rating's aspects were entered in the
app or API (not imported) when the rating has no `import_id` (imports set it; the app and the
API never do) or when it was edited after its import (`version` > 1: only the app and API edit
ratings). Such a rating, and such a revision in its history, whose fluency, relevance and
descriptiveness are all exactly 0.5, gets NULL (not rated) for the three. Overall is kept.
Imported ratings keep their values, 0.5 or not. Downgrading leaves the NULLs (the 0.5s were
never the annotators' judgement) and drops the spans.

Critical annotations get a `spans` column: each phrase's [start, end] character span of the
caption, found case-insensitively for the markings stored before (first occurrence).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""
import re

from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

ASPECTS = ('fluency', 'relevance', 'descriptiveness')
GROUPS = ('critical_objects', 'backgrounds', 'relationships')


def _all_half(table):
    return sa.and_(*[table.c[name] == 0.5 for name in ASPECTS])


def unset_keyboard_aspects(connection) -> None:
    meta = sa.MetaData()
    ratings = sa.Table('ratings', meta, sa.Column('id', sa.Integer), sa.Column('import_id', sa.Integer),
                       sa.Column('version', sa.Integer), *[sa.Column(name, sa.Float) for name in ASPECTS])
    revisions = sa.Table('rating_revisions', meta, sa.Column('rating_id', sa.Integer),
                         sa.Column('version', sa.Integer), *[sa.Column(name, sa.Float) for name in ASPECTS])
    unset = {name: None for name in ASPECTS}
    connection.execute(ratings.update()
                       .where(sa.or_(ratings.c.import_id.is_(None), ratings.c.version > 1), _all_half(ratings))
                       .values(**unset))
    # A revision's values came from the app or API unless it is version 1 of an imported rating.
    entered = sa.select(ratings.c.id).where(ratings.c.import_id.is_(None))
    connection.execute(revisions.update()
                       .where(sa.or_(revisions.c.rating_id.in_(entered), revisions.c.version > 1),
                              _all_half(revisions))
                       .values(**unset))


def _span(text: str, phrase: str) -> list:
    found = re.search(re.escape(phrase), text, re.IGNORECASE)
    return list(found.span()) if found else []


def fill_spans(connection) -> None:
    meta = sa.MetaData()
    marks = sa.Table('critical_annotations', meta, sa.Column('id', sa.Integer), sa.Column('caption_id', sa.Integer),
                     *[sa.Column(name, sa.JSON) for name in GROUPS], sa.Column('spans', sa.JSON))
    captions = sa.Table('captions', meta, sa.Column('id', sa.Integer), sa.Column('text', sa.Text))
    rows = connection.execute(sa.select(marks, captions.c.text).join(captions, captions.c.id == marks.c.caption_id))
    for row in rows.mappings().all():
        spans = {name: [_span(row['text'], phrase) for phrase in row[name] or []] for name in GROUPS}
        connection.execute(marks.update().where(marks.c.id == row['id']).values(spans=spans))


def upgrade() -> None:
    connection = op.get_bind()
    unset_keyboard_aspects(connection)
    with op.batch_alter_table('critical_annotations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('spans', sa.JSON(), nullable=True))
    fill_spans(connection)
    with op.batch_alter_table('critical_annotations', schema=None) as batch_op:
        batch_op.alter_column('spans', existing_type=sa.JSON(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('critical_annotations', schema=None) as batch_op:
        batch_op.drop_column('spans')
