"""One caption with a line separator must not move any other caption's n-gram scores.

The PTB tokenizer (Java) starts a new output line at \\n, \\r, \\r\\n, \\v, \\f, U+2028 and U+2029,
and all texts of a batch go through it as one file of lines. Before `coco.one_line`, a caption
holding \\v, \\f, U+2028 or U+2029 split into two lines and every later text of the batch was
paired with its neighbour's tokens, which then stayed in the process-wide token cache: a clean
caption's BLEU-1 fell from 1.0 to 0.368 in the batch and still scored 0.368 alone afterwards.
"""
from __future__ import annotations

import subprocess

import pytest

from scoring.api import ScoreItem
from scoring.metrics import coco
from scoring.metrics.base import MetricUnavailable

SEPARATORS = {
    "LF": "\n", "CR": "\r", "CRLF": "\r\n", "VT": "\x0b", "FF": "\x0c", "NEL": "\x85",
    "LS": "\u2028", "PS": "\u2029", "FS": "\x1c", "GS": "\x1d", "RS": "\x1e",
}
# By hand: all 6 candidate tokens occur in the references (clipped counts 1 each) and the
# closest reference length is 6, so the brevity penalty is 1 and BLEU-1 = 6/6.
CLEAN = ScoreItem(None, "a dog runs in the park", ["the dog runs in the park", "a dog is in a park"])


def _bleu1(scorer, items) -> list[float]:
    return scorer.score(items, ["BLEU-1"])["BLEU-1"].values


@pytest.mark.java
@pytest.mark.parametrize("kind", list(SEPARATORS))
def test_a_separator_in_a_neighbour_moves_no_clean_caption(java, tiny_scorer, kind):
    coco._ptb_cache.clear()  # the bug lived on in this cache: start from nothing
    separator = SEPARATORS[kind]
    neighbour = ScoreItem(None, f"a cat{separator}on a mat", [f"a cat sits{separator}on a mat", "a cat on a rug"])
    together = _bleu1(tiny_scorer, [neighbour, CLEAN, CLEAN])
    assert together[1:] == pytest.approx([1.0, 1.0])
    assert _bleu1(tiny_scorer, [CLEAN]) == pytest.approx([1.0])  # nothing wrong was cached
    # The neighbour itself scores as the same caption written on one line.
    coco._ptb_cache.clear()
    flat = ScoreItem(None, "a cat on a mat", ["a cat sits on a mat", "a cat on a rug"])
    assert together[0] == pytest.approx(_bleu1(tiny_scorer, [flat])[0])
    assert 0.5 < together[0] < 1.0  # "sits" is missing from the candidate: not a trivial value


@pytest.mark.java
def test_every_separator_gives_one_line_of_the_tokens_of_the_spaced_text(java):
    coco._ptb_cache.clear()
    texts = [f"A cat{separator}on a mat." for separator in SEPARATORS.values()] + ["", "Two dogs!"]
    assert coco.ptb_tokenize(texts) == ["a cat on a mat"] * len(SEPARATORS) + ["", "two dogs"]


@pytest.mark.parametrize("lines", ["a\nb\nc", "a"], ids=["more lines", "fewer lines"])
def test_a_tokenizer_answer_with_another_number_of_lines_is_refused_and_not_cached(monkeypatch, lines):
    """Whatever the cause, one line per text or no score: a shifted answer is never used."""
    coco._ptb_cache.clear()
    monkeypatch.setattr(coco, "require_java", lambda: "java")
    monkeypatch.setattr(coco.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=lines.encode(), stderr=b""))
    with pytest.raises(MetricUnavailable, match=r"returned \d lines for 2 texts \(it must return one per text\); no n-gram score was computed$"):
        coco.ptb_tokenize(["first text", "second text"])
    assert coco._ptb_cache.get("first text") is None and coco._ptb_cache.get("second text") is None
