"""World sets are written in the formats the importers and recipes read."""
import csv
import json

from scoring.world.sets import split_scenes, write_all


def test_splits_are_disjoint():
    train = {s.seed for s in split_scenes("train", 300)}
    held = {s.seed for s in split_scenes("heldout", 300)}
    assert not train & held


def test_write_all_formats(tmp_path):
    summary = write_all(tmp_path, count=8, size=48)
    assert summary["scenes"] == 8
    candidates = json.loads((tmp_path / "scoring" / "candidates_de.json").read_text(encoding="utf-8"))
    references = json.loads((tmp_path / "scoring" / "references_de.json").read_text(encoding="utf-8"))
    assert set(candidates) == set(references) and len(candidates) == 8
    assert all(isinstance(v, str) for v in candidates.values())
    assert all(isinstance(v, list) and v for v in references.values())
    for image_id in candidates:
        assert (tmp_path / "scoring" / "images" / f"{image_id}.png").is_file()
    with open(tmp_path / "rated" / "ratings.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {"image", "text", "lang", "oracle", "annotator", "overall", "fluency"} <= set(rows[0])
    assert {r["lang"] for r in rows} == {"en", "de", "fr", "es", "ja"}
    specs = [json.loads(line) for line in (tmp_path / "finetune" / "specs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all("".join(r["detail_units"]) == r["caption"] for r in specs)
    prmcs = [json.loads(line) for line in (tmp_path / "finetune" / "prmcs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(r["critical_objects"] and r["english"] for r in prmcs)
    pacs = [json.loads(line) for line in (tmp_path / "finetune" / "pacs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all((tmp_path / "finetune" / r["generated_image"]).is_file() for r in pacs)
    meta = json.loads((tmp_path / "retrieval" / "meta" / "world.json").read_text(encoding="utf-8"))
    assert meta["languages"] == ["en", "de", "fr", "es", "ja"]
    assert all(set(e["captions"]) == set(meta["languages"]) for e in meta["images"])
