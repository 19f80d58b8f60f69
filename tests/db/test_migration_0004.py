"""Migration 0004: aspect values the Rate view stored as untouched 0.5s become NULL (only
where the app or API entered them), and stored critical objects get their character spans."""
from __future__ import annotations

import json

from sqlalchemy import text

from db.session import current_revision, get_engine, head_revision, upgrade

NOW = "2026-01-01 00:00:00"


def test_0004_unsets_entered_half_aspects_and_fills_spans(empty_db_url):
    upgrade(empty_db_url, "0003")
    engine = get_engine(empty_db_url)
    with engine.begin() as c:
        c.execute(text(f"INSERT INTO users (id, name, role, created_at) VALUES (1, 'ann', 'annotator', '{NOW}')"))
        c.execute(text(f"INSERT INTO imports (id, format, source_name, source_sha256, counts, created_at) "
                       f"VALUES (1, 'csv', 'x.csv', 'ab', '{{}}', '{NOW}')"))
        c.execute(text(f"INSERT INTO images (id, sha256, format, width, height, size_bytes, created_at) "
                       f"VALUES (1, 'cd', 'PNG', 2, 2, 10, '{NOW}')"))
        for cid in range(1, 7):
            c.execute(text(f"INSERT INTO captions (id, image_id, text, language, kind, created_at) "
                           f"VALUES ({cid}, 1, 'a man in a White shirt', 'en', 'candidate', '{NOW}')"))
        rows = [  # id, import_id, version, fluency, relevance, descriptiveness
            (1, None, 1, 0.5, 0.5, 0.5),  # keyboard rating in the app: unset
            (2, 1, 1, 0.5, 0.5, 0.5),     # imported: kept
            (3, None, 1, 0.5, 0.6, 0.5),  # a slider moved: kept
            (4, 1, 2, 0.5, 0.5, 0.5),     # imported, then re-rated in the app: unset
            (5, None, 1, None, None, None),
        ]
        for rid, imp, version, f, r, d in rows:
            c.execute(text("INSERT INTO ratings (id, caption_id, annotator_id, overall, fluency, relevance, "
                           "descriptiveness, version, import_id, created_at, updated_at) VALUES "
                           "(:id, :id, 1, 0.8, :f, :r, :d, :v, :imp, :now, :now)"),
                      dict(id=rid, f=f, r=r, d=d, v=version, imp=imp, now=NOW))
        for rev, (rid, version) in enumerate([(4, 1), (1, 1)], start=1):  # imported v1 kept; app v1 unset
            c.execute(text("INSERT INTO rating_revisions (id, rating_id, version, overall, fluency, relevance, "
                           "descriptiveness, valid_from, replaced_at) VALUES (:id, :rid, :v, 0.7, 0.5, 0.5, 0.5, "
                           ":now, :now)"), dict(id=rev, rid=rid, v=version, now=NOW))
        c.execute(text(f"INSERT INTO critical_annotations (id, caption_id, annotator_id, critical_objects, "
                       f"backgrounds, relationships, created_at, updated_at) VALUES (1, 6, 1, "
                       f"'[\"white shirt\", \"man\"]', '[]', '[\"in\"]', '{NOW}', '{NOW}')"))
    upgrade(empty_db_url)
    assert current_revision(empty_db_url) == head_revision()
    with engine.connect() as c:
        aspects = {row[0]: tuple(row[1:]) for row in c.execute(text(
            "SELECT id, fluency, relevance, descriptiveness FROM ratings ORDER BY id"))}
        overall = c.execute(text("SELECT DISTINCT overall FROM ratings")).scalars().all()
        revisions = {row[0]: row[1] for row in c.execute(text("SELECT id, fluency FROM rating_revisions"))}
        spans = c.execute(text("SELECT spans FROM critical_annotations")).scalar()
    assert aspects == {1: (None, None, None), 2: (0.5, 0.5, 0.5), 3: (0.5, 0.6, 0.5), 4: (None, None, None),
                       5: (None, None, None)}
    assert overall == [0.8]
    assert revisions == {1: 0.5, 2: None}
    spans = spans if isinstance(spans, dict) else json.loads(spans)  # SQLite hands back the JSON text
    assert spans == {"critical_objects": [[11, 22], [2, 5]], "backgrounds": [], "relationships": [[6, 8]]}
