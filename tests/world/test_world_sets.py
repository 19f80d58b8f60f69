"""World sets are written in the formats the importers and recipes read."""
import csv
import json
from pathlib import Path

from scoring.world.captions import scene_captions
from scoring.world.errors import candidates_for
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
    def rows(name):
        text = (tmp_path / "finetune" / f"{name}.jsonl").read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines()]

    specs = rows("specs")
    assert specs and all(r["positive"].startswith(r["base"]) and r["negative"].startswith(r["base"]) for r in specs)
    assert all(r["positive"] != r["negative"] for r in specs)
    # each triplet carries its full caption (the paper's contrastive text) and the scene's short caption
    short = {(r["image"], r["language"]): r["caption"] for r in rows("teacher") if r["style"] == "short"}
    assert all(r["caption"].startswith(r["positive"]) and r["short_caption"] == short[r["image"], r["language"]]
               for r in specs)
    # and one of the scene's short captions with exactly one content error, in the same language
    erred = {(scene.scene_id, lang): {c.text for c in candidates_for(scene, short.description, (lang,))
                                      if len(c.errors) == 1}
             for scene in split_scenes("heldout", 8)
             for lang, short in scene_captions(scene, ("en", "de", "fr", "es", "ja"))["short"].items()}
    assert all(r["short_with_error"] in erred[Path(r["image"]).stem, r["language"]] for r in specs)
    assert len({r["short_with_error"] for r in specs}) > len({r["short_caption"] for r in specs})
    prmcs = rows("prmcs")
    assert {r["operation"] for r in prmcs} == {"repetition", "removal", "masking", "jumble", "substitution"}
    assert all(r["original"] != r["perturbed"] for r in prmcs)
    assert all(r["english"] for r in rows("teacher"))
    umic = rows("umic")
    assert umic and all(len(r["negatives"]) == 4 and r["positive"] not in r["negatives"] for r in umic)
    # UMIC's own four kinds (UMIC §3.2), in the paper's order; the content errors are a separate set.
    assert {tuple(r["negative_kinds"]) for r in umic} == {
        ("keyword-substitution", "random", "repeat-remove", "permutation")}
    # Every caption of a scene is a positive, as UMIC takes every reference: short and long ones.
    words = [len(r["positive"].split()) for r in umic if r["language"] == "en"]
    assert min(words) < 15 and max(words) >= 30
    errors = rows("umic-errors")
    assert errors and all(set(r["negative_kinds"]) <= {"colour", "shape", "relation", "missing", "hallucinated", "random"}
                          for r in errors)
    pacs = rows("pacs")
    assert all((tmp_path / "finetune" / r["generated_image"]).is_file() and r["generated_caption"] for r in pacs)
    # each PAC-S row carries its scene's long caption in its language ("" where the scene has none)
    long = {(r["image"], r["language"]): r["caption"] for r in rows("teacher") if r["style"] == "long"}
    assert [r["long_caption"] for r in pacs] == [long.get((r["image"], r["language"]), "") for r in pacs]
    assert any(r["long_caption"] for r in pacs) and {r["caption"] for r in pacs} == set(short.values())
    meta = json.loads((tmp_path / "retrieval" / "meta" / "world.json").read_text(encoding="utf-8"))
    assert meta["languages"] == ["en", "de", "fr", "es", "ja"]
    assert all(set(e["captions"]) == set(meta["languages"]) for e in meta["images"])


def test_unit_pool_leaves_out_the_scene_and_its_units_as_the_filtered_list_would():
    """SPECS negatives are drawn from the pool without rebuilding it per caption; the draws
    must be the ones a plain filtered list gives (same length, same item at every index)."""
    import random

    from scoring.world.sets import UnitPool

    rng = random.Random(7)
    words = [f" unit {k}." for k in range(12)]  # few distinct units: many repeats across scenes
    entries = [(f"s{rng.randrange(30)}", rng.choice(words)) for _ in range(400)]
    pool = UnitPool(entries)
    for scene_id, units in [("s3", [words[0], words[5]]), ("s11", []), ("nobody", words[:11]), ("s0", words)]:
        expected = [u for sid, u in entries if sid != scene_id and u not in units]
        foreign = pool.foreign(scene_id, units)
        assert len(foreign) == len(expected)
        assert [foreign[k] for k in range(len(foreign))] == expected
        draws = random.Random(1), random.Random(1)
        if expected:
            assert [draws[0].choice(foreign) for _ in range(50)] == [draws[1].choice(expected) for _ in range(50)]
    assert len(pool.foreign("s0", words)) == 0  # every unit excluded: no negative to draw


def test_rated_collection_in_parallel_writes_the_same_files(tmp_path, monkeypatch):
    import scoring.world.sets as sets

    monkeypatch.setattr(sets, "RATED_PART", 2)  # five scenes: three parts, two worker processes
    scenes = split_scenes("train", 5)
    one = sets.write_rated_collection(tmp_path / "one", scenes, langs=("en", "ja"), size=32)
    two = sets.write_rated_collection(tmp_path / "two", scenes, langs=("en", "ja"), size=32, workers=2)
    assert one == two > 5 * 3
    for name in ("ratings.jsonl", "ratings.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    images = sorted(p.name for p in (tmp_path / "one" / "images").iterdir())
    assert images == sorted(p.name for p in (tmp_path / "two" / "images").iterdir()) and len(images) == 5
    for name in images:
        assert (tmp_path / "one" / "images" / name).read_bytes() == (tmp_path / "two" / "images" / name).read_bytes()


def test_specs_shuffle_is_the_share_of_negatives_whose_words_are_shuffled(tmp_path):
    """`specs_shuffle` (the paper's 0.9 by default): at 0 every d− is another scene's unit as
    written, at 1 every unit of two or more words is shuffled; the rest of the triplet is the same."""
    from scoring.world.sets import write_finetune_sets

    scenes = split_scenes("train", 14)

    def specs(name, kind="specs", **kwargs):
        if not (tmp_path / name).is_dir():
            write_finetune_sets(tmp_path / name, scenes, ("en",), size=32, **kwargs)
        text = (tmp_path / name / f"{kind}.jsonl").read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines()]

    default, never, always = specs("default"), specs("never", specs_shuffle=0.0), specs("always", specs_shuffle=1.0)
    assert [r["positive"] for r in never] == [r["positive"] for r in default] == [r["positive"] for r in always]
    assert not any(r["negative_shuffled"] for r in never)
    assert all(r["negative_shuffled"] for r in always if len(r["negative"][len(r["base"]):].split()) >= 2)
    share = sum(r["negative_shuffled"] for r in default) / len(default)
    assert len(default) >= 50 and 0.7 <= share < 1.0
    units = {r["negative"][len(r["base"]):] for r in never}  # unshuffled: units of the other scenes' captions
    captions = " ".join(r["caption"] for r in specs("default", "teacher"))
    assert all(unit in captions for unit in units)


def test_umic_hard_negatives_are_captions_of_the_most_similar_images(tmp_path):
    """With image embeddings, UMIC's "another image's caption" is, about half of the time (the
    paper's share), a caption of one of the three images nearest by those embeddings; the other
    three negatives and every positive stay as without them."""
    import numpy as np

    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.registry import tiny_dir
    from scoring.training.data import clip_image_embedder
    from scoring.world.sets import write_finetune_sets

    scenes = split_scenes("train", 16)
    # scenes 2k and 2k+1 point almost the same way (their angles differ by 1e-3, pairs by more)
    pairs = np.sort(np.random.default_rng(3).uniform(0, 3.0, len(scenes) // 2))
    angles = np.array([pairs[k // 2] + (k % 2) * 1e-3 for k in range(len(scenes))])
    seen = []

    def embed(paths):
        seen.extend(paths)
        return np.stack([np.cos(angles), np.sin(angles), np.zeros(len(angles))], axis=1)

    def umic(name, **kwargs):
        write_finetune_sets(tmp_path / name, scenes, ("en",), size=32, **kwargs)
        return [json.loads(line) for line in (tmp_path / name / "umic.jsonl").read_text(encoding="utf-8").splitlines()]

    plain, hard = umic("plain"), umic("hard", embed_images=embed)
    assert [p.name for p in seen] == [f"{s.scene_id}.png" for s in scenes] and all(p.is_file() for p in seen)
    assert {r["negative_kinds"][1] for r in plain} == {"random"}
    kinds = [r["negative_kinds"][1] for r in hard]
    assert set(kinds) == {"random", "hard"} and 0.25 <= kinds.count("hard") / len(kinds) <= 0.75
    assert [r["positive"] for r in hard] == [r["positive"] for r in plain]
    assert [[n for k, n in enumerate(r["negatives"]) if k != 1] for r in hard] == \
        [[n for k, n in enumerate(r["negatives"]) if k != 1] for r in plain]
    captions = {}  # every caption of each scene (a positive's group may be left out as a no-op)
    for line in (tmp_path / "plain" / "teacher.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        captions.setdefault(Path(row["image"]).stem, set()).add(row["caption"])
    order = [s.scene_id for s in scenes]
    for r in hard:
        if r["negative_kinds"][1] == "hard":
            k = order.index(Path(r["image"]).stem)
            gaps = np.abs(angles - angles[k])
            gaps[k] = np.inf
            nearest = {order[j] for j in np.argsort(gaps, kind="stable")[:3]}
            assert any(r["negatives"][1] in captions[sid] for sid in nearest)
    # the embedder a world spec names: a CLIP's unit-length image embeddings, one row per file
    ensure_tiny_checkpoints()
    matrix = clip_image_embedder(str(tiny_dir() / "clip"))(seen[:3])
    assert matrix.shape[0] == 3 and np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(matrix[0], matrix[1])


def test_a_world_set_naming_a_missing_or_wrong_embedder_fails_before_writing(tmp_path, monkeypatch):
    import pytest

    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.registry import tiny_dir
    from scoring.training.data import world_set

    ensure_tiny_checkpoints()
    text_encoder = tiny_dir() / "mclip-text"
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    spec = {"scenes": 4, "split": "train", "size": 32, "languages": ["en"]}
    with pytest.raises(ValueError, match="model not found"):
        world_set("umic", spec | {"umic_hard_negatives": str(tmp_path / "no-such-clip")})
    with pytest.raises(ValueError, match="is not a CLIP model"):
        world_set("umic", spec | {"umic_hard_negatives": str(text_encoder)})
    folder = tmp_path / "data" / "cache" / "world-sets"
    assert not folder.exists() or not any((p / "images").is_dir() for p in folder.iterdir())
