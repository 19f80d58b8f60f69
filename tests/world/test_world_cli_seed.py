"""`caplens world` subcommands and the demo seeding through the importer."""
import json

from app.cli import main
from scoring.world.seed import DEMO_COLLECTION, seed_demo, seed_demo_if_empty


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

    from db.models import Caption, Collection, Rating
    from db.session import dispose_engines, session_scope

    try:
        report = seed_demo_if_empty(scenes=2)
        assert report["collection"] == DEMO_COLLECTION
        assert report["counts"]["ratings"] > 0
        with session_scope() as session:
            collection = session.scalar(select(Collection).where(Collection.name == DEMO_COLLECTION))
            languages = {c.language for c in collection.captions}
            kinds = {c.kind for c in collection.captions}
            assert languages == {"en", "de", "fr", "es", "ja"}
            assert {"candidate", "perturbed"} <= kinds
            assert session.scalar(select(func.count()).select_from(Rating)) > 0
            captions = session.scalar(select(func.count()).select_from(Caption))
        assert seed_demo_if_empty(scenes=2) is None
        assert seed_demo(scenes=2)["skipped"] == "already seeded"
        with session_scope() as session:
            assert session.scalar(select(func.count()).select_from(Caption)) == captions
    finally:
        dispose_engines()
