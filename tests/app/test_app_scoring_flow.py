"""Score-tab plumbing with the real tiny scorer: caching, edits, text-only rows, truncation flags."""
from __future__ import annotations

import pytest

from app import engine
from app.tabs.score import ScoreRequest, load_images, run_scoring

PROFILE = "tiny"


@pytest.fixture
def scorer_calls(monkeypatch):
    """Record how many items each scorer call receives (the real scorer still runs)."""
    calls: list[int] = []
    real = engine.score_items

    def recording(profile, items, metrics):
        calls.append(len(items))
        return real(profile, items, metrics)

    monkeypatch.setattr(engine, "score_items", recording)
    return calls


def test_editing_one_caption_rescores_only_that_caption(image_file, scorer_calls):
    images, messages = load_images([str(image_file)])
    assert messages == []
    cache: dict = {}
    captions = ["a red square", "a dog on the grass", "two cats", "a red car", "a man riding a horse"]
    first = run_scoring(PROFILE, ScoreRequest(images, captions, ["a red square"], "en", ["CLIP-S", "BLEU-1"]), cache)
    assert first.scored_now == 5 and scorer_calls == [5]
    edited = captions[:2] + ["two small cats"] + captions[3:]
    second = run_scoring(PROFILE, ScoreRequest(images, edited, ["a red square"], "en", ["CLIP-S", "BLEU-1"]), cache)
    assert second.scored_now == 1 and scorer_calls == [5, 1]
    # Unchanged rows keep their values; the edited one has its own.
    for row_a, row_b in zip(first.frame.to_dict("records"), second.frame.to_dict("records")):
        if row_a["caption"] == row_b["caption"]:
            assert row_a["CLIP-S"] == row_b["CLIP-S"]
    assert second.frame.loc[2, "caption"] == "two small cats"


def test_without_image_only_text_metrics_have_values():
    outcome = run_scoring(PROFILE, ScoreRequest([], ["a red square"], ["a red square"], "en", ["CLIP-S", "BLEU-1"]), {})
    row = outcome.frame.iloc[0]
    assert row["BLEU-1"] == pytest.approx(1.0)
    assert row["CLIP-S"] is None or row["CLIP-S"] != row["CLIP-S"]  # None / NaN: needs an image
    status = {a["metric"]: a["status"] for a in outcome.availability}
    assert status["CLIP-S"].startswith("available (needs")


def test_long_caption_reports_truncation(image_file):
    images, _ = load_images([str(image_file)])
    long_caption = " ".join(["a red square next to a blue circle"] * 60)
    outcome = run_scoring(PROFILE, ScoreRequest(images, [long_caption], [], "en", ["CLIP-S"]), {})
    assert "CLIP-S" in outcome.frame.iloc[0]["truncated by"]


def test_auto_language_is_detected_per_caption():
    outcome = run_scoring(PROFILE, ScoreRequest([], ["ein roter Hund läuft über die Wiese", "a red dog runs"], [],
                                                "auto", ["BLEU-1"]), {})
    assert list(outcome.frame["lang"]) == ["de", "en"]
