"""The persisted score store never serves a value computed under other settings or another
CIDEr-D IDF (`scoring.fingerprint.score_fingerprint` keys every stored value).

Before: CIDEr-D was stored under the key "toolkit". A collection of one image scored CIDEr-D
0.0 (one image gives every n-gram an IDF of 0); after two more images were added, the first
image's caption was still served 0.0 from the store, where scoring the three now gives it 3.10.
"""
from __future__ import annotations

import shutil

import pytest
from PIL import Image

from annotation.transfer.importers import import_rows
from annotation.scores.score_store import cached_metric_names, collection_scores
from db.models import MetricScore
from db.session import session_scope
from scoring.api import ScoreItem, Scorer

pytestmark = [pytest.mark.java, pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")]

ROWS = [
    ("a black cat sleeps on a red sofa", ["a black cat asleep on a red sofa", "a cat on a couch"]),
    ("two dogs run across a green field", ["two dogs running on grass", "dogs play in a field"]),
    ("a man rides a bicycle down the street", ["a person riding a bike on a road", "a cyclist in town"]),
]


class CountingScorer:
    """A real Scorer that counts the captions each metric is asked to score."""

    def __init__(self, scorer):
        self.scorer, self.scored = scorer, {}

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, items, metrics=None, **options):
        for name in metrics:
            self.scored[name] = self.scored.get(name, 0) + len(items)
        return self.scorer.score(items, metrics, **options)


def _add(session, user, folder, indices):
    rows = []
    for k in indices:
        Image.new("RGB", (32, 24), (60 * k, 120, 200 - 50 * k)).save(folder / f"{k}.png")
        caption, references = ROWS[k]
        rows.append({"image": f"{k}.png", "caption": caption, "language": "en", "kind": "candidate",
                     "caption_id": f"c{k}", "references": references})
    import_rows(session, user, rows, collection="grow", base_dir=folder)


def _cider(session, user, scorer) -> dict[str, float]:
    table = collection_scores(session, user, "grow", scorer, ["CIDEr", "BLEU-1"])
    return dict(zip(table["candidate"], table["CIDEr"]))


def test_cider_of_one_image_is_not_served_once_the_collection_grows(engine, accounts, tmp_path):
    researcher = accounts["rita"]
    world = Scorer("world", device="cpu")  # CIDEr and BLEU need no checkpoint
    with session_scope(engine) as session:
        _add(session, researcher, tmp_path, [0])
        first = CountingScorer(world)
        assert _cider(session, researcher, first) == {ROWS[0][0]: 0.0}  # one image: every IDF is 0
        _add(session, researcher, tmp_path, [1, 2])
        grown = CountingScorer(world)
        values = _cider(session, researcher, grown)
        assert grown.scored["CIDEr"] == 3  # nothing served from the one-image store
    fresh = world.score([ScoreItem(None, caption, refs) for caption, refs in ROWS], ["CIDEr"])["CIDEr"].values
    assert [values[caption] for caption, _ in ROWS] == pytest.approx(fresh)
    assert values[ROWS[0][0]] > 1.0

    with session_scope(engine) as session:  # the same three images again: all from the store
        again = CountingScorer(world)
        assert _cider(session, researcher, again) == pytest.approx(values)
        assert again.scored == {}
        assert cached_metric_names(session, researcher, "grow", world) == ["BLEU-1", "CIDEr"]
        keys = {metric: {k for (k,) in session.query(MetricScore.checkpoint_fingerprint)
                         .filter(MetricScore.metric == metric).distinct()} for metric in ("CIDEr", "BLEU-1")}
        assert len(keys["CIDEr"]) == 2  # one key per IDF: of one image, then of three
        assert len(keys["BLEU-1"]) == 1  # BLEU does not depend on the set of images


def test_a_changed_metric_setting_is_scored_again_not_served(engine, accounts, tmp_path, monkeypatch):
    researcher = accounts["rita"]
    with session_scope(engine) as session:
        _add(session, researcher, tmp_path, [0, 1, 2])
        before = collection_scores(session, researcher, "grow", Scorer("world", device="cpu"), ["BLEU-4"])
        monkeypatch.setenv("CAPLENS_REGISTRY_BLEU_4_N", "1")  # BLEU-4 now computes BLEU-1
        changed = CountingScorer(Scorer("world", device="cpu"))
        after = collection_scores(session, researcher, "grow", changed, ["BLEU-4", "BLEU-1"])
    assert changed.scored["BLEU-4"] == 3
    assert list(after["BLEU-4"]) == pytest.approx(list(after["BLEU-1"]))
    assert list(after["BLEU-4"]) != pytest.approx(list(before["BLEU-4"]))
