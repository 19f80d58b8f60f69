"""The world-set cache (`scoring.training.data.world_set`): a set is written aside and renamed
into place, so a writer that stopped half-way, or two runs asking for the same set at once, never
leave a run reading a half-written set."""
import json

import scoring.world.sets as world_sets
from scoring.training.data import world_set

SPEC = {"scenes": 4, "split": "train", "size": 32, "languages": ["en"]}


def _cache(tmp_path):
    return tmp_path / "cache" / "world-sets"


def test_a_set_left_half_written_is_rewritten_and_nothing_partial_stays(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    first, digest, _ = world_set("pacs", SPEC)
    (folder,) = _cache(tmp_path).iterdir()
    (folder / "DONE").unlink()  # as if the writer had stopped before it finished
    (folder / "pacs.jsonl").write_text('{"image": "images/gone.png", "caption": "half"}\n', encoding="utf-8")
    again, again_digest, _ = world_set("pacs", SPEC)
    assert again == first and again_digest == digest and len(first) == 4
    assert [p.name for p in _cache(tmp_path).iterdir()] == [folder.name]
    assert json.loads((folder / "DONE").read_text(encoding="utf-8")) == SPEC


def test_when_another_run_finishes_the_same_set_first_its_copy_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    real = world_sets.write_finetune_sets
    finished_first = []

    def racing(out, scenes, langs, size):
        real(out, scenes, langs, size=size)
        final = out.with_name(out.name.split(".partial-")[0])  # the other run renames its copy first
        real(final, scenes, langs, size=size)
        (final / "DONE").write_text(json.dumps(SPEC), encoding="utf-8")
        finished_first.append(final)
        return {}

    monkeypatch.setattr(world_sets, "write_finetune_sets", racing)
    rows, _, _ = world_set("pacs", SPEC)
    assert len(finished_first) == 1 and len(rows) == 4
    assert [p.name for p in _cache(tmp_path).iterdir()] == [finished_first[0].name]  # our copy went
    assert all((finished_first[0] / r["image"]).is_file() for r in rows)
    assert all("long_caption" in r for r in rows)
