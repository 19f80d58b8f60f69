"""Stored language codes in their canonical form ("EN" -> "en", "pt_BR" -> "pt-BR",
"zh-hant" -> "zh-Hant").

Until 2026-11-30 a caption's language was stored as given; since then every lookup and every new
caption takes the canonical form only (annotation.captions.validate_language), so captions,
transcreations and queue skips stored under another spelling could no longer be found or
rated in their language. Codes shaped as language codes (2-3 letters, then subtags of 2-8
letters or digits, joined by "-" or "_") are rewritten; anything else is left as it was. A
transcreation or a skip whose canonical code would collide with a row already stored under it
(same source, annotator, task) keeps its old code: nothing is deleted. Downgrading leaves the
codes canonical (the old spellings are not recorded).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30
"""
import re

from alembic import op
import sqlalchemy as sa


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

CODE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")
# (table, language column, the other columns of its unique key: a rewrite may not collide on it)
COLUMNS = (("captions", "language", ()),
           ("transcreations", "target_language", ("source_caption_id", "annotator_id")),
           ("queue_skips", "language", ("annotator_id", "caption_id", "task")))


def canonical(code: str) -> str:
    """BCP 47 case: the language lower case, a script title case, a region upper case. The rule
    of annotation.captions.validate_language as of this revision, kept here: `db` imports nothing
    of ours, and a migration must do what it did when it was written."""
    if not CODE.match(code):
        return code
    primary, *subtags = code.replace("_", "-").split("-")

    def subtag(tag: str) -> str:
        if len(tag) == 4 and tag.isalpha():
            return tag.title()
        if (len(tag) == 2 and tag.isalpha()) or (len(tag) == 3 and tag.isdigit()):
            return tag.upper()
        return tag.lower()

    return "-".join([primary.lower(), *map(subtag, subtags)])


def upgrade() -> None:
    bind = op.get_bind()
    for name, column, key in COLUMNS:
        table = sa.table(name, sa.column("id"), sa.column(column), *map(sa.column, key))
        other = table.alias("other")
        for code in bind.execute(sa.select(table.c[column]).distinct()).scalars().all():
            fixed = canonical(code or "")
            if not code or fixed == code:
                continue
            clash = sa.exists().where(other.c[column] == fixed, *[other.c[k] == table.c[k] for k in key])
            bind.execute(sa.update(table).where(table.c[column] == code, *([~clash] if key else []))
                         .values({column: fixed}))


def downgrade() -> None:
    pass
