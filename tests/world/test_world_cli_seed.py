"""`caplens world` subcommands and the demo seeding through the importer."""
import json

from annotation.demo_seed import seed_demo, seed_demo_if_empty
from app.cli import main
from scoring.world.demo import DEMO_COLLECTION


def test_world_show_prints_scene_and_captions(capsys, tmp_path):
    assert main(["world", "show", "5", "--image", str(tmp_path / "s.png"), "--size", "64"]) == 0
    out = capsys.readouterr().out
    assert '"scene_id": "world-000005"' in out and "[short ja]" in out
    assert (tmp_path / "s.png").is_file()


def test_world_sets_command(capsys, tmp_path):
    assert main(["world", "sets", str(tmp_path / "sets"), "--scenes", "3", "--size", "32"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["scenes"] == 3 and (tmp_path / "sets" / "rated" / "ratings.jsonl").is_file()


def test_world_bad_input_is_one_clear_error(capsys, tmp_path):
    assert main(["world", "sets", str(tmp_path / "x"), "--scenes", "0"]) == 2
    assert "at least one scene" in capsys.readouterr().err


def test_seed_fills_an_empty_database_once(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    from sqlalchemy import func, select

    from annotation.database import database_session
    from db.models import Caption, Collection, Rating
    from db.session import dispose_engines

    try:
        report = seed_demo_if_empty(scenes=2)
        assert report["collection"] == DEMO_COLLECTION
        assert report["counts"]["ratings"] > 0
        with database_session() as session:
            collection = session.scalar(select(Collection).where(Collection.name == DEMO_COLLECTION))
            languages = {c.language for c in collection.captions}
            kinds = {c.kind for c in collection.captions}
            assert languages == {"en", "de", "fr", "es", "ja"}
            assert {"candidate", "perturbed"} <= kinds
            assert session.scalar(select(func.count()).select_from(Rating)) > 0
            captions = session.scalar(select(func.count()).select_from(Caption))
        assert seed_demo_if_empty(scenes=2) is None
        assert seed_demo(scenes=2)["skipped"] == "already seeded"
        with database_session() as session:
            assert session.scalar(select(func.count()).select_from(Caption)) == captions
    finally:
        dispose_engines()


def test_rated_collection_imports_through_the_importer(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    from annotation.people.accounts import create_user
    from annotation.database import database_session
    from annotation.transfer.importers import import_file
    from db.session import dispose_engines
    from scoring.world.sets import split_scenes, write_rated_collection

    rows = write_rated_collection(tmp_path / "rated", split_scenes("heldout", 2), annotators=3, size=32)
    try:
        with database_session() as session:
            user = create_user(session, "researcher-1", "researcher")
            counts = import_file(session, user, tmp_path / "rated" / "ratings.jsonl", collection="w").counts
        assert counts["ratings"] == rows and counts["captions"] * 3 == rows
    finally:
        dispose_engines()


def test_demo_references_are_in_the_candidates_language(tmp_path):
    from scoring.world.demo import demo_rows

    rows = demo_rows(2, tmp_path)
    captions_by_lang = {}
    for row in rows:
        captions_by_lang.setdefault(row["language"], set()).add(row["caption"])
    rated = [row for row in rows if row.get("kind") == "candidate"]
    assert {row["language"] for row in rated} == {"en", "de", "fr", "es", "ja"}
    # A one-object scene's short and long captions can coincide, leaving its correct caption
    # without a distinct reference; every other candidate has one.
    assert sum(bool(row["references"]) for row in rated) > 0.8 * len(rated)
    for row in rated:
        assert row["caption"] not in row["references"]
        others = set().union(*(texts for lang, texts in captions_by_lang.items() if lang != row["language"]))
        assert not others.intersection(row["references"]), (row["language"], row["references"])


def test_demo_rows_build_without_an_optional_pos_pipeline(tmp_path, monkeypatch):
    """A Space installs no Spanish spaCy pipeline: the demo still builds (this raised
    "POS tagging unavailable for es" and stopped `caplens serve`); a Spanish substitution
    that needs POS tags is left out, and everything else is there."""
    from scoring.perturb import pos
    from scoring.world.demo import demo_rows

    monkeypatch.setitem(pos.TAGGERS, "es", pos.TaggerSpec("spacy", ("no_such_spanish_pipeline",), "not installable"))
    pos._load.cache_clear()
    pos._tag_cached.cache_clear()
    try:
        assert pos.unavailable_reason("es").startswith("POS tagging unavailable for es")
        rows = demo_rows(2, tmp_path)
    finally:
        pos._load.cache_clear()
        pos._tag_cached.cache_clear()
    perturbed = {(row["language"], row["op"]) for row in rows if row.get("kind") == "perturbed"}
    assert ("es", "substitution") not in perturbed
    assert {("es", "jumble"), ("es", "removal"), ("en", "jumble")} <= perturbed
    assert {row["language"] for row in rows if row.get("kind") == "candidate"} == {"en", "de", "fr", "es", "ja"}


def test_seeding_builds_the_demo_before_it_takes_the_write_lock(tmp_path, monkeypatch):
    """Building the demo's rows takes seconds to minutes beside a warming server; a login or rating
    written meanwhile must not wait on the seeding's transaction (a first run answered a wrong
    password with "the database is busy" until the demo was in)."""
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    import annotation.demo_seed as demo_seed
    from annotation.database import database_session
    from annotation.people.accounts import create_user
    from db.session import dispose_engines

    built = demo_seed.demo_rows

    def rows_while_someone_writes(scenes, folder):
        with database_session() as session:  # another user's write, committed while the rows are built
            create_user(session, "early-bird", "annotator")
        return built(scenes, folder)

    monkeypatch.setattr(demo_seed, "demo_rows", rows_while_someone_writes)
    monkeypatch.setenv("CAPLENS_DB_BUSY_TIMEOUT_MS", "500")
    try:
        assert seed_demo(scenes=1)["collection"] == DEMO_COLLECTION
        from sqlalchemy import select

        from db.models import User
        with database_session() as session:
            assert session.scalar(select(User).where(User.name == "early-bird")) is not None
    finally:
        dispose_engines()
