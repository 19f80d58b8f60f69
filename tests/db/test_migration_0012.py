"""Migration 0012: language codes stored before the canonical form was required are rewritten
in it, so those captions can be found and rated in their language again; nothing else moves."""
from __future__ import annotations

from sqlalchemy import text

from annotation.captions import validate_language
from db.session import current_revision, get_engine, head_revision, upgrade

NOW = "2026-01-01 00:00:00"


def test_0012_rewrites_stored_language_codes_in_their_canonical_form(empty_db_url):
    upgrade(empty_db_url, "0011")
    engine = get_engine(empty_db_url)
    codes = ["en", "EN", "pt_BR", "zh_hant_tw", "es-419", "DE", "english", "x-klingon"]
    with engine.begin() as c:
        for uid, name in [(1, "ann"), (2, "bea")]:
            c.execute(text(f"INSERT INTO users (id, name, role, created_at) VALUES ({uid}, '{name}', 'annotator', "
                           f"'{NOW}')"))
        c.execute(text(f"INSERT INTO images (id, sha256, format, width, height, size_bytes, created_at) "
                       f"VALUES (1, 'cd', 'PNG', 2, 2, 10, '{NOW}')"))
        for cid, code in enumerate(codes, start=1):
            c.execute(text("INSERT INTO captions (id, image_id, text, language, kind, created_at) "
                           "VALUES (:id, 1, 'a caption', :code, 'candidate', :now)"), dict(id=cid, code=code, now=NOW))
        for tid, (source, result, target, annotator) in enumerate(
                [(1, 6, "DE", 1),   # -> de
                 (1, 2, "de", 2),   # already canonical
                 (1, 3, "De", 2)],  # bea has a "de" transcreation of caption 1 already: kept as it was
                start=1):
            c.execute(text("INSERT INTO transcreations (id, source_caption_id, result_caption_id, target_language, "
                           "text, annotator_id, created_at, updated_at) VALUES (:id, :s, :r, :t, 'x', :a, :now, :now)"),
                      dict(id=tid, s=source, r=result, t=target, a=annotator, now=NOW))
        for sid, (caption, language) in enumerate([(1, "JA"), (1, ""), (2, "ja"), (2, "JA")], start=1):
            c.execute(text("INSERT INTO queue_skips (id, annotator_id, caption_id, task, language, created_at) "
                           "VALUES (:id, 1, :c, 'transcreation', :l, :now)"), dict(id=sid, c=caption, l=language, now=NOW))
    upgrade(empty_db_url)
    assert current_revision(empty_db_url) == head_revision()
    with engine.connect() as c:
        captions = c.execute(text("SELECT language FROM captions ORDER BY id")).scalars().all()
        targets = c.execute(text("SELECT target_language FROM transcreations ORDER BY id")).scalars().all()
        skips = c.execute(text("SELECT language FROM queue_skips ORDER BY id")).scalars().all()
    assert captions == ["en", "en", "pt-BR", "zh-Hant-TW", "es-419", "de", "english", "x-klingon"]
    assert all(validate_language(code) == code for code in captions[:6])
    assert targets == ["de", "de", "De"]
    assert skips == ["ja", "", "ja", "JA"]
