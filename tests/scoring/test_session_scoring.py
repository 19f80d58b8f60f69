"""Scoring what a person typed (`scoring.session_scoring`, behind the Score tab and /score)
with the real tiny scorer: caching, edits, text-only rows, truncation flags."""
from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from PIL import Image

from scoring.api import get_scorer
from scoring.session_scoring import ScoreRequest, score_request

PROFILE = "tiny"


@dataclass
class Upload:
    image: Image.Image
    data: bytes
    name: str


def red_square() -> list[Upload]:
    buffer = io.BytesIO()
    Image.new("RGB", (48, 40), (200, 30, 30)).save(buffer, format="PNG")
    return [Upload(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), buffer.getvalue(), "red.png")]


class CountingScorer:
    """The real tiny scorer, recording how many items each `score` call receives."""

    def __init__(self):
        self.scorer = get_scorer(PROFILE)
        self.calls: list[int] = []

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, items, metrics=None):
        self.calls.append(len(items))
        return self.scorer.score(items, metrics)


def run_scoring(request: ScoreRequest, cache: dict, scorer=None):
    return score_request(scorer or get_scorer(PROFILE), request, cache)


def test_editing_one_caption_rescores_only_that_caption():
    images = red_square()
    scorer = CountingScorer()
    cache: dict = {}
    captions = ["a red square", "a dog on the grass", "two cats", "a red car", "a man riding a horse"]
    first = run_scoring(ScoreRequest.grid(images, captions, ["a red square"], "en", ["CLIP-S", "BLEU-1"]), cache, scorer)
    assert first.scored_now == 5 and scorer.calls == [5]
    edited = captions[:2] + ["two small cats"] + captions[3:]
    second = run_scoring(ScoreRequest.grid(images, edited, ["a red square"], "en", ["CLIP-S", "BLEU-1"]), cache, scorer)
    assert second.scored_now == 1 and scorer.calls == [5, 1]
    # Unchanged rows keep their values; the edited one has its own.
    for row_a, row_b in zip(first.frame.to_dict("records"), second.frame.to_dict("records")):
        if row_a["caption"] == row_b["caption"]:
            assert row_a["CLIP-S"] == row_b["CLIP-S"]
    assert second.frame.loc[2, "caption"] == "two small cats"


def test_without_image_only_text_metrics_have_values():
    outcome = run_scoring(ScoreRequest.grid([], ["a red square"], ["a red square"], "en", ["CLIP-S", "BLEU-1"]), {})
    row = outcome.frame.iloc[0]
    assert row["BLEU-1"] == pytest.approx(1.0)
    assert row["CLIP-S"] is None or row["CLIP-S"] != row["CLIP-S"]  # None / NaN: needs an image
    status = {a["metric"]: a["status"] for a in outcome.availability}
    assert status["CLIP-S"].startswith("available (needs")


def test_long_caption_reports_truncation():
    long_caption = " ".join(["a red square next to a blue circle"] * 60)
    outcome = run_scoring(ScoreRequest.grid(red_square(), [long_caption], [], "en", ["CLIP-S"]), {})
    assert "CLIP-S" in outcome.frame.iloc[0]["truncated by"]


def test_auto_language_is_detected_per_caption():
    outcome = run_scoring(ScoreRequest.grid([], ["ein roter Hund läuft über die Wiese", "a red dog runs"], [], "auto",
                                       ["BLEU-1"]), {})
    assert list(outcome.frame["lang"]) == ["de", "en"]


def test_metric_names_are_case_insensitive_and_unknown_ones_refused():
    outcome = run_scoring(ScoreRequest.grid([], ["a red square"], ["a red square"], "en", ["bleu-1"]), {})
    assert outcome.metric_columns == ["BLEU-1"] and outcome.frame.loc[0, "BLEU-1"] == pytest.approx(1.0)
    with pytest.raises(LookupError, match="unknown metric 'NOPE'"):
        run_scoring(ScoreRequest.grid([], ["a red square"], [], "en", ["BLEU-1", "NOPE"]), {})
