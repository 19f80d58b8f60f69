"""A collection's wide score table read from the MetricScore cache, scoring only what is missing."""
import dataclasses
import os
import shutil

import pandas as pd
import pytest
from PIL import Image

from annotation.captions import get_collection
from annotation.database import open_database
from annotation.perturbations import store_perturbation
from annotation.scores.score_store import collection_scores, fill_metric_cache, into_collection
from db.models import MetricScore, User
from db.session import dispose_engines, session_scope
from scoring.analysis.datasets import load_flickr8k_json
from scoring.analysis.robustness import robustness_table
from scoring.analysis.tables import collection_correlations, rated_captions, robustness_input
from scoring.api import Scorer
from scoring.fingerprint import score_fingerprint
from scoring.perturb.ops import perturb

ADMIN = User(name="local-cli", role="admin")
METRICS = ["BLEU-1", "CLIP-S"]


class CountingScorer:
    """A real Scorer that counts the captions each metric was asked to score."""

    def __init__(self, scorer: Scorer):
        self.scorer = scorer
        self.scored: dict[str, int] = {}

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, items, metrics=None):
        for name in metrics:
            self.scored[name] = self.scored.get(name, 0) + len(items)
        return self.scorer.score(items, metrics)


def fresh_scorer(clip_dir=None) -> CountingScorer:
    """A new Scorer (as after a server restart), optionally with CLIP loaded from `clip_dir`."""
    scorer = Scorer("tiny")
    if clip_dir is not None:
        backbones = dict(scorer.registry.backbones)
        backbones["clip"] = dataclasses.replace(backbones["clip"], path=clip_dir)
        scorer.registry = dataclasses.replace(scorer.registry, backbones=backbones)
    return CountingScorer(scorer)


@pytest.fixture
def collection(tmp_path, monkeypatch, flickr8k_json):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAPLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'caplens.db'}")
    engine = open_database()
    root = flickr8k_json.parent
    (root / "Flicker8k_Dataset").mkdir()
    Image.new("RGB", (40, 30), (180, 120, 40)).save(root / "Flicker8k_Dataset" / "1000_aa.jpg")
    Image.new("RGB", (40, 30), (20, 90, 200)).save(root / "Flicker8k_Dataset" / "2000_bb.jpg")
    with session_scope(engine) as session:
        into_collection(session, ADMIN, load_flickr8k_json(flickr8k_json), "f8k", root)
        stored = get_collection(session, "f8k")
        for caption in [c for c in stored.captions if c.kind == "candidate"]:
            change = perturb(caption.text, "jumble", seed=1, lang=caption.language)
            if not change.noop:
                store_perturbation(session, ADMIN, caption, change, collection=stored)
    yield engine
    dispose_engines()


def scores(engine, scorer, metrics=METRICS) -> pd.DataFrame:
    with session_scope(engine) as session:
        return collection_scores(session, ADMIN, "f8k", scorer, metrics)


def test_wide_table_has_human_and_metric_columns(collection):
    table = scores(collection, fresh_scorer())
    assert list(table.columns[:12]) == ["caption_id", "image_id", "image_file", "candidate", "lang", "kind",
                                        "parent_caption_id", "op", "human", "n_ratings", "references", "collection"]
    assert list(table.columns[12:]) == METRICS
    originals = table[table["kind"] == "candidate"]
    assert len(originals) == 3 and set(table["op"]) >= {"original", "jumble"}
    assert sorted(originals["human"]) == pytest.approx([0.0, 1 / 3, 5 / 6])  # mean rating per caption
    assert table[METRICS].notna().all().all()
    assert (table[table["kind"] == "perturbed"]["human"].isna()).all()


def test_second_call_after_restart_reads_the_database(collection):
    first = fresh_scorer()
    before = scores(collection, first)
    assert first.scored == {name: len(before) for name in METRICS}
    again = fresh_scorer()  # new process state: nothing in memory, only the database
    after = scores(collection, again)
    assert again.scored == {}
    pd.testing.assert_frame_equal(before, after)
    with session_scope(collection) as session:
        assert session.query(MetricScore).count() == len(before) * len(METRICS)


def test_only_missing_metrics_and_captions_are_scored(collection):
    scores(collection, fresh_scorer(), ["BLEU-1"])
    later = fresh_scorer()
    table = scores(collection, later)
    assert later.scored == {"CLIP-S": len(table)}
    with session_scope(collection) as session:  # the CLI's cache filler scores what Analyze reads: cached already
        references = len(get_collection(session, "f8k").captions) - len(table)
        assert fill_metric_cache(session, ADMIN, later, "f8k", METRICS) == {}
        assert fill_metric_cache(session, ADMIN, later, "f8k", METRICS) == {}
    # References are not scored (against themselves among their references, BLEU would be 1).
    assert references > 0 and later.scored == {"CLIP-S": len(table)}


def test_another_checkpoint_never_reuses_cached_values(collection, tmp_path):
    default = fresh_scorer()
    scores(collection, default)
    clip_copy = tmp_path / "clip-copy"
    shutil.copytree(default.registry.backbones["clip"].path, clip_copy)
    moved = fresh_scorer(clip_copy)
    assert score_fingerprint(moved, "CLIP-S") != score_fingerprint(default, "CLIP-S")
    assert score_fingerprint(moved, "BLEU-1") == score_fingerprint(default, "BLEU-1")
    table = scores(collection, moved)
    assert moved.scored == {"CLIP-S": len(table)}
    counted = fresh_scorer(clip_copy)  # the same copied checkpoint after a restart: all cached
    again = scores(collection, counted)
    assert counted.scored == {}
    pd.testing.assert_frame_equal(again, table)
    weights = next(f for f in sorted(clip_copy.rglob("*")) if f.is_file())
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # retrained in place
    retrained = fresh_scorer(clip_copy)
    scores(collection, retrained)
    assert retrained.scored == {"CLIP-S": len(table)}


def test_annotators_cannot_score_a_collection(collection):
    annotator = User(name="rater", role="annotator")
    with session_scope(collection) as session, pytest.raises(PermissionError):
        collection_scores(session, annotator, "f8k", fresh_scorer(), METRICS)
    with session_scope(collection) as session, pytest.raises(ValueError, match="Choose a collection"):
        collection_scores(session, ADMIN, "", fresh_scorer(), METRICS)


def test_rated_captions_and_robustness_input(collection):
    table = scores(collection, fresh_scorer())
    rated = rated_captions(table)
    assert set(rated["kind"]) == {"candidate"} and rated["human"].notna().all()
    long = robustness_input(table, METRICS)
    assert set(long["metric"]) == set(METRICS) and set(long["op"]) == {"original", "jumble"}
    assert len(long) == 2 * len(table)
    assert robustness_table(long).loc[0, "n_original"] >= 1
    assert robustness_input(table[table["kind"] != "perturbed"], METRICS) is None


def test_collection_correlations_use_rated_captions_per_language(collection):
    table = scores(collection, fresh_scorer())
    result = collection_correlations(table, METRICS, n_boot=0)
    assert set(result["metric"]) == set(METRICS) and (result["n"] == 3).all() and set(result["lang"]) == {"en"}
    with pytest.raises(ValueError, match="Fewer than two rated captions"):
        collection_correlations(table[table["kind"] == "perturbed"], METRICS, n_boot=0)
