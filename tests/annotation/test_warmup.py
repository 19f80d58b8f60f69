"""The server's background warm-up (`annotation.warmup`, issue 25): every metric loaded, the demo
collection analyzed once, so that the first Analyze of it scores nothing."""
from __future__ import annotations

import threading

from annotation.warmup import LOADING, READY, SCORING, WarmUpState, start_warm_up, warm_up


class CountingScorer:
    """The tiny scorer, counting the items and the metrics each `score` call receives."""

    def __init__(self):
        from scoring.api import get_scorer

        self.scorer = get_scorer("tiny")
        self.calls: list[tuple[int, tuple]] = []

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, items, metrics=None, **kwargs):
        self.calls.append((len(items), tuple(metrics or ())))
        return self.scorer.score(items, metrics, **kwargs)


def test_the_banner_line_says_how_far_the_warm_up_got():
    assert WarmUpState(LOADING, 4, 15).line() == ("Warming up: loading the models (4 of 15 metrics); the first score "
                                                  "may wait for them.")
    assert WarmUpState(SCORING, 40, 100).line() == ("Warming up: scoring the demo collection once, so that its "
                                                    "first analysis only reads the scores (40 %).")
    assert WarmUpState(READY, 15, 15).line() == WarmUpState().line() == ""
    assert WarmUpState(LOADING).active and not WarmUpState(READY).active


def test_warm_up_loads_each_metric_then_analyses_the_demo_collection_so_analyze_scores_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))
    from sqlalchemy import select

    from annotation.scores.collection_analysis import analyse_collection
    from annotation.database import database_session
    from annotation.demo_seed import seed_demo
    from db.models import Collection, MetricScore
    from db.session import dispose_engines
    from scoring.language_id import _detector
    from scoring.world.demo import DEMO_COLLECTION

    try:
        _detector.cache_clear()  # as in a fresh server: no detector built, no language model loaded
        seeding = threading.Thread(target=seed_demo, kwargs={"scenes": 2})
        scorer = CountingScorer()
        names = ["BLEU-1", "CLIP-S", "ROUGE-L"]
        lines = []
        seeding.start()
        state = warm_up(scorer, names, DEMO_COLLECTION, seeding, lines.append)
        assert state.stage == READY and state.line() == ""
        # One probe per metric, one metric at a time, before the collection.
        assert [metrics for _, metrics in scorer.calls[:3]] == [("BLEU-1",), ("CLIP-S",), ("ROUGE-L",)]
        assert all(count == 1 for count, _ in scorer.calls[:3])
        assert _detector.cache_info().currsize == 1  # language detection ran once, loading its models
        assert sum(count for count, _ in scorer.calls[3:]) > 0  # the collection's captions
        assert len(lines) == 1 and lines[0].startswith("warmed up in ")
        assert lines[0].endswith(f"models loaded, collection {DEMO_COLLECTION!r} scored.")
        with database_session(read_only=True) as session:
            owner = session.scalar(select(Collection.created_by_id).where(Collection.name == DEMO_COLLECTION))
            assert session.scalar(select(MetricScore).limit(1)) is not None
        scorer.calls.clear()
        report = analyse_collection(owner, DEMO_COLLECTION, scorer, names)  # the first Analyze a person clicks
        assert scorer.calls == [] and report.summary  # every score read back, none computed
    finally:
        dispose_engines()


def test_a_failing_warm_up_ends_itself_not_the_server(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path))

    class Broken:
        def score(self, items, metrics=None, **kwargs):
            raise OSError("disk full")

    lines = []
    thread = start_warm_up(Broken(), ["BLEU-1"], "world-demo", None, lines.append)
    assert thread.daemon  # never holds the server's exit
    thread.join(60)
    assert lines and lines[0].startswith("warm-up stopped: ") and "disk full" in lines[0]
    state = warm_up(Broken(), ["BLEU-1"], "world-demo")
    assert state.stage == "failed" and "disk full" in state.problem and state.line() == ""
