"""A score-corpus run imported into a collection: the app's analysis table reads its scores."""
from __future__ import annotations

import json

import pytest

from annotation.scores.corpus_scores import import_corpus_scores
from annotation.scores.score_store import collection_scores
from db.models import Caption
from db.session import session_scope
from scoring.api import Scorer
from scoring.corpus import open_manifest, read_scores, score_corpus


class CountingScorer:
    """A real Scorer that counts the captions it is asked to score."""

    def __init__(self, scorer: Scorer):
        self.scorer, self.scored = scorer, 0

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, items, metrics=None):
        self.scored += len(items)
        return self.scorer.score(items, metrics)


@pytest.fixture
def corpus_run(tmp_path):
    """10 world scenes captioned by two models, scored with CLIP-S (20 rows)."""
    from scoring.world.sets import split_scenes, write_scoring_inputs

    write_scoring_inputs(tmp_path, split_scenes("heldout", 10), langs=("en",), size=48)
    candidates = json.loads((tmp_path / "candidates_en.json").read_text())
    references = json.loads((tmp_path / "references_en.json").read_text())
    ids = list(candidates)
    with open(tmp_path / "manifest.jsonl", "w") as handle:
        for model in ("good", "shifted"):
            for k, image_id in enumerate(ids):
                caption = candidates[image_id] if model == "good" else candidates[ids[(k + 1) % len(ids)]]
                handle.write(json.dumps({"id": image_id, "model": model, "image": f"images/{image_id}.png",
                                         "candidate": caption, "references": references[image_id]}) + "\n")
    out = tmp_path / "out"
    score_corpus(open_manifest(tmp_path / "manifest.jsonl"), out, profile="world", metrics=["CLIP-S"],
                 engine="local", n_boot=0)
    return out


def test_imported_corpus_scores_serve_the_collection_table(engine, accounts, corpus_run):
    researcher = accounts["rita"]
    with session_scope(engine) as session:
        report = import_corpus_scores(session, researcher, corpus_run, "world-corpus")
    assert (report.captions_imported, report.captions_matched, report.rows_skipped, report.scores_stored) == (20, 0, 0, 20)

    scorer = CountingScorer(Scorer("world"))
    with session_scope(engine) as session:
        table = collection_scores(session, researcher, "world-corpus", scorer, ["CLIP-S"])
        external = dict(session.query(Caption.id, Caption.external_id).all())
    assert scorer.scored == 0  # every value came from the imported scores
    scores = read_scores(corpus_run)
    expected = {f"{m}/{i}": s for m, i, s in zip(scores["model"], scores["id"], scores["score"])}
    assert dict(zip((external[c] for c in table["caption_id"]), table["CLIP-S"])) == expected

    with session_scope(engine) as session:  # a second import matches the captions, adds none
        again = import_corpus_scores(session, researcher, corpus_run, "world-corpus")
        assert session.query(Caption).filter(Caption.kind == "candidate").count() == 20
    assert (again.captions_imported, again.captions_matched, again.scores_stored) == (0, 20, 20)


def test_annotators_cannot_import_scores(engine, accounts, corpus_run):
    with session_scope(engine) as session, pytest.raises(PermissionError):
        import_corpus_scores(session, accounts["ann"], corpus_run, "world-corpus")


def test_caplens_db_import_scores_stores_a_run(engine, accounts, corpus_run, capsys):
    """The command line's import (it called the schema check without the database's URL and
    ended in a TypeError on every run)."""
    from app.cli import main

    assert main(["db", "import-scores", str(corpus_run), "--collection", "world-corpus", "--user", "rita"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["captions_imported"], report["scores_stored"]) == (20, 20)
    with session_scope(engine, read_only=True) as session:
        assert session.query(Caption).filter(Caption.kind == "candidate").count() == 20
