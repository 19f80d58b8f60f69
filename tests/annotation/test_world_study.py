"""Ratings that teach, end to end at tiny size: simulated annotators rate world captions through
the queue (`annotation.studies.tasks`), the ratings are exported with `build_finetune_set`, CapLens-R
(cross mode) trains on that set, registers and scores."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from scoring.world.scene import generate_scenes
from scoring.world.sets import rated_rows

EXPORTED_FIELDS = {"candidate", "language", "kind", "references", "human_score", "n_ratings", "score_from", "fluency",
                   "relevance", "descriptiveness", "ratings", "caption_id", "parent_caption_id", "import_id", "image",
                   "image_sha256"}


@pytest.fixture
def study_set(accounts, engine, tmp_path):
    from annotation.training.world_study import export_study, run_world_study
    from db.session import session_scope

    scenes = generate_scenes(1_000_000, 2)
    with session_scope(engine) as session:
        rita = session.get(type(accounts["rita"]), accounts["rita"].id)
        report = run_world_study(session, rita, scenes, "study", tmp_path / "work", langs=("en",), size=32)
    with session_scope(engine) as session:
        rita = session.get(type(accounts["rita"]), accounts["rita"].id)
        manifest = export_study(session, rita, "study", tmp_path / "set")
    return scenes, report, manifest, tmp_path / "set"


def test_every_caption_gets_k_ratings_equal_to_the_direct_simulation(study_set):
    import json

    scenes, report, manifest, folder = study_set
    rows = [json.loads(line) for line in (folder / "data.jsonl").read_text(encoding="utf-8").splitlines()]
    assert report.captions == len(rows) == manifest["rows"] and report.ratings == 3 * len(rows)
    assert all(r["n_ratings"] == 3 for r in rows)
    # Only what a study delivers: no oracle, errors or damage from the generator.
    assert set().union(*rows) == EXPORTED_FIELDS
    # The queue delivers exactly the ratings the annotators give (the same as the direct writer):
    # the same (caption, mean overall, mean fluency) multiset (a text may recur in two scenes).
    direct = defaultdict(list)
    for r in rated_rows(scenes, ("en",)):
        direct[r["caption_id"]].append(r)
    expected = sorted((g[0]["text"], round(np.mean([r["overall"] for r in g]), 6),
                       round(np.mean([r["fluency"] for r in g]), 6)) for g in direct.values())
    exported = sorted((r["candidate"], round(r["human_score"], 6), round(r["fluency"], 6)) for r in rows)
    assert exported == expected


def test_exported_ratings_train_a_cross_caplens_r_that_registers_and_scores(study_set, tmp_path):
    from scoring.api import Scorer, ScoreItem
    from scoring.tiny import ensure_tiny_checkpoints
    from scoring.training import load_config, train
    from scoring.user_registry import register_run

    ensure_tiny_checkpoints()
    scenes, _report, _manifest, folder = study_set
    result = train(load_config("caplens-r-cross-tiny", data=str(folder), out=str(tmp_path / "run")))
    assert result.backbone_kind == "blip-itm" and "tau_c" in result.after
    name = register_run(result, profile="tiny")
    assert name.startswith("CapLens-R@")
    scorer = Scorer("tiny")
    assert scorer.registry.metrics[name].variant == "cross"
    from scoring.world.render import render_scene

    image = render_scene(scenes[0], 32)
    values = scorer.score([ScoreItem(image, "a red circle"), ScoreItem(image, "a blue square above a red star")],
                          [name])[name]
    assert values.unavailable is None
    assert all(0.0 <= v <= 1.0 for v in values.values)

