"""Scoring what a person typed (`scoring.session_scoring`, behind the Score tab and /score)
with the real tiny scorer: caching, edits, text-only rows, truncation flags."""
from __future__ import annotations

import io
from dataclasses import dataclass

import pytest
from PIL import Image

from scoring.api import ScoreItem, get_scorer
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
    # Unchanged rows keep their values; the edited one has the value a fresh score gives it.
    before, after = first.frame.to_dict("records"), second.frame.to_dict("records")
    assert len(after) == 5 and [r["caption"] for r in after] == edited
    for i in (0, 1, 3, 4):
        assert (after[i]["CLIP-S"], after[i]["BLEU-1"]) == (before[i]["CLIP-S"], before[i]["BLEU-1"])
    fresh = scorer.scorer.score([ScoreItem(images[0].image, "two small cats", ["a red square"])], ["CLIP-S"])["CLIP-S"]
    assert after[2]["CLIP-S"] == pytest.approx(fresh.values[0], abs=5e-4) and after[2]["CLIP-S"] != before[2]["CLIP-S"]


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


# -- rows: each image its own candidates and references ------------------------------------

def coloured(name: str, colour) -> Upload:
    buffer = io.BytesIO()
    Image.new("RGB", (48, 40), colour).save(buffer, format="PNG")
    return Upload(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), buffer.getvalue(), name)


def test_each_row_is_scored_with_its_own_image_and_references():
    from scoring.session_scoring import ScoreRow

    images = [coloured("red.png", (200, 30, 30)), coloured("blue.png", (30, 30, 200))]
    rows = [ScoreRow("red.png", "a red square", ["a red square"]),
            ScoreRow("blue", "a blue square", ["a square that is blue"]),  # names match without extension
            ScoreRow("green.png", "a green square", ["a green square"])]
    outcome = run_scoring(ScoreRequest(images, rows, "en", ["BLEU-1", "CLIP-S"]), {})
    assert list(outcome.frame["image"]) == ["red.png", "blue.png"]
    assert outcome.frame.loc[0, "BLEU-1"] == pytest.approx(1.0)  # its own reference, not the other image's
    assert outcome.frame.loc[1, "BLEU-1"] < 1.0
    assert outcome.messages == ["row 3: no image named 'green.png' (images: red.png, blue.png); row left out."]
    # A blank image cell is every image.
    outcome = run_scoring(ScoreRequest(images, [ScoreRow("", "a square", ["a square"])], "en", ["BLEU-1"]), {})
    assert list(outcome.frame["image"]) == ["red.png", "blue.png"]
    # Every row left out (its file was no image, so nothing could be read): one refusal naming
    # each row, not a table of metrics "available" over no pair.
    with pytest.raises(ValueError) as refused:
        run_scoring(ScoreRequest([], [ScoreRow("notimage.png", "a green circle", []), ScoreRow("b.png", "a dog", [])],
                                 "en", ["BLEU-1"]), {})
    assert str(refused.value).splitlines() == [
        "row 1: no image named 'notimage.png' (images: none that could be read); row left out.",
        "row 2: no image named 'b.png' (images: none that could be read); row left out.",
        "Nothing to score: every row names an image that is not here."]


def test_table_cells_split_references_and_skip_empty_rows():
    from scoring.session_scoring import split_references, table_records, table_rows

    records = [["a.png", "a cat", "a cat | a small cat"], ["", "", ""], ["b.png", "a dog", '["a dog, barking", "dog"]'],
               [None, "text only", None]]
    rows = table_rows(records)
    assert [(r.image, r.candidate, r.references) for r in rows] == [
        ("a.png", "a cat", ["a cat", "a small cat"]), ("b.png", "a dog", ["a dog, barking", "dog"]),
        ("", "text only", [])]
    assert table_records(rows)[0] == ["a.png", "a cat", "a cat | a small cat"]
    assert split_references("one\ntwo | three") == ["one", "two", "three"]


def test_rows_files_fill_the_table(tmp_path):
    import json

    from scoring.session_scoring import rows_from_files

    (tmp_path / "rows.jsonl").write_text("\n".join([
        json.dumps({"image": "a.png", "candidate": "a cat", "references": ["a cat", "cat"]}),
        json.dumps({"image": "b.png", "caption": "a dog"}),
        json.dumps({"image": "c.png", "candidate": "  "}),
        "not json"]))
    records, messages = rows_from_files([tmp_path / "rows.jsonl"])
    assert records == [["a.png", "a cat", "a cat | cat"], ["b.png", "a dog", ""]]
    assert messages == ["row 3: no candidate", "row 4: line 4 is not valid JSON (Expecting value)"]
    (tmp_path / "results.json").write_text(json.dumps([{"image_id": 7, "caption": "a red square"}]))
    (tmp_path / "captions.json").write_text(json.dumps({"images": [{"id": 7, "file_name": "seven.png"}],
                                                        "annotations": [{"image_id": 7, "caption": "red square"}]}))
    records, messages = rows_from_files([tmp_path / "captions.json", tmp_path / "results.json"])
    assert records == [["seven.png", "a red square", "red square"]] and messages == []
    with pytest.raises(ValueError, match="expected a .csv, .jsonl, .parquet or .json file"):
        rows_from_files([tmp_path / "rows.txt"])
    # A file whose columns are none of a rows file's says so once, naming what it has and needs
    # (each row's "no candidate" told nothing of the columns).
    (tmp_path / "other.csv").write_text("foo,bar,baz\n1,2,3\n4,5,6\n")
    with pytest.raises(ValueError) as refused:
        rows_from_files([tmp_path / "other.csv"])
    assert str(refused.value) == ("other.csv: no `candidate` column (its columns: bar, baz, foo); a rows file has the "
                                  "columns image, candidate and references (id, lang and model if wanted)")
    (tmp_path / "captions.csv").write_text("image,caption\na.png,a cat\n")
    assert rows_from_files([tmp_path / "captions.csv"]) == ([["a.png", "a cat", ""]], [])


@pytest.mark.java
def test_cider_from_one_image_says_why_it_is_zero_and_a_collection_source_is_used(java):
    from scoring.metrics.coco import reference_document_frequency
    from scoring.session_scoring import DocumentFrequencies, ScoreRow

    images = [coloured("red.png", (200, 30, 30))]
    refs = ["a red square on a table", "a red block"]
    rows = [ScoreRow("red.png", "a red square", refs), ScoreRow("red.png", "a blue circle", refs)]
    outcome = run_scoring(ScoreRequest(images, rows, "en", ["CIDEr"]), {})
    assert list(outcome.frame["CIDEr"]) == [0.0, 0.0]
    status = outcome.availability[0]["status"]
    assert "not meaningful: document frequencies from the references of one image" in status and "this batch" in status
    collection = reference_document_frequency([refs, ["a dog on the grass"], ["two cats asleep"], ["a green car"]])
    source = DocumentFrequencies("collection 'demo'", collection)
    cache: dict = {}
    outcome = run_scoring(ScoreRequest(images, rows, "en", ["CIDEr"], source), cache)
    values = list(outcome.frame["CIDEr"])
    assert values[0] > values[1] >= 0 and values[0] > 0.5
    assert outcome.availability[0]["status"] == ("available; document frequencies from collection 'demo': "
                                                 "4 reference set(s)")
    # Back to this batch: the remembered collection values are not reused for it.
    assert list(run_scoring(ScoreRequest(images, rows, "en", ["CIDEr"]), cache).frame["CIDEr"]) == [0.0, 0.0]


def test_the_status_says_when_captions_are_in_a_language_the_metric_was_not_made_for_and_when_scores_are_clipped():
    """CLIP-S is made for English: German and French captions get a number, and the status says
    how many are not English; MCS (any language) says nothing of it. A score of exactly 0 from a
    w · max(cos, 0) metric is a clipped negative cosine, and the status counts them."""
    from scoring.session_scoring import ScoreRow, metric_availability

    rows = [ScoreRow("", caption, []) for caption in
            ("a red square on a white ground", "ein rotes Quadrat auf weißem Grund", "un carré rouge sur fond blanc")]
    outcome = run_scoring(ScoreRequest(red_square(), rows, "auto", ["CLIP-S", "MCS"]), {})
    assert list(outcome.frame["lang"]) == ["en", "de", "fr"]
    statuses = {a["metric"]: a["status"] for a in outcome.availability}
    assert statuses["CLIP-S"].startswith("available; made for en: 2 of 3 caption(s) are in de, fr")
    assert not statuses["MCS"].startswith("available; made for")
    # A caption without letters has no language ("und"): the status says what that code means.
    unknown = run_scoring(ScoreRequest(red_square(), [ScoreRow("", "🙂🙂 123", [])], "auto", ["CLIP-S"]), {})
    assert list(unknown.frame["lang"]) == ["und"]
    assert unknown.availability[0]["status"].startswith(
        "available; made for en: 1 of 1 caption(s) are in und (no language: no letters to tell it from)")
    # two captions whose tiny CLIP cosine with the red square is negative
    clipped = run_scoring(ScoreRequest(red_square(), [ScoreRow("", c, []) for c in ("xyz", "nothing at all", "a dog")],
                                       "en", ["CLIP-S"]), {})
    assert list(clipped.frame["CLIP-S"] == 0.0) == [True, True, False]
    assert clipped.availability[0]["status"] == "available; 2 of 3 score(s) are 0: a negative cosine is clipped to 0"
    meta = {"SPECS": {"languages": ("en",), "clips_at_zero": True}, "BLEU-1": {"languages": ("en",)}}
    table = [{"SPECS": 0.0, "BLEU-1": 0.0, "lang": "en"}, {"SPECS": 0.31, "BLEU-1": 0.5, "lang": "en"},
             {"SPECS": 0.0, "BLEU-1": 0.0, "lang": "en"}, {"SPECS": None, "BLEU-1": None, "lang": "en"}]
    assert [a["status"] for a in metric_availability(["SPECS", "BLEU-1"], meta, table, True)] == [
        "available; 2 of 3 score(s) are 0: a negative cosine is clipped to 0", "available"]
    table[1]["lang"] = "ja"
    assert metric_availability(["SPECS"], meta, table, True, notes={"SPECS": "a note"})[0]["status"] == (
        "available; a note; made for en: 1 of 3 caption(s) are in ja; 2 of 3 score(s) are 0: a negative cosine is "
        "clipped to 0")


def test_the_status_says_a_word_overlap_metric_reads_a_japanese_caption_as_one_word():
    """The PTB tokenizer splits at spaces: a Japanese caption is one word to BLEU, so the Score
    tab's per-batch status says so beside "made for en", as the collection views do; CLIP-S, which
    reads no words, does not."""
    from scoring.session_scoring import ScoreRow

    rows = [ScoreRow("", "白い地面に赤い四角", ["白い背景の赤い四角"]), ScoreRow("", "a red square", ["a red square on white"])]
    outcome = run_scoring(ScoreRequest(red_square(), rows, "auto", ["BLEU-1", "CLIP-S"]), {})
    assert list(outcome.frame["lang"]) == ["ja", "en"]
    statuses = {a["metric"]: a["status"] for a in outcome.availability}
    assert statuses["BLEU-1"] == (
        "available; made for en: 1 of 2 caption(s) are in ja; each ja caption is read as one word (ja is written "
        "without spaces, and the COCO toolkit splits words at spaces), so the ja values are not word overlap")
    assert statuses["CLIP-S"].startswith("available; made for en: 1 of 2 caption(s) are in ja") and "one word" not in statuses["CLIP-S"]


def test_rows_without_references_are_named_in_the_reference_metrics_status():
    """Each row takes its own references: rows 2 and 3 without any get no RefCLIP-S or BLEU-1
    value, and the status says which rows and why instead of a bare "available"; CLIP-S, which
    needs none, scores all three and says nothing of it."""
    from scoring.session_scoring import ScoreRow

    rows = [ScoreRow("", "a red square", ["a red square on white"]), ScoreRow("", "a red box", []),
            ScoreRow("", "a dog", [])]
    outcome = run_scoring(ScoreRequest(red_square(), rows, "en", ["RefCLIP-S", "BLEU-1", "CLIP-S"]), {})
    frame = outcome.frame.set_index("#")
    assert frame.loc[1, "BLEU-1"] is not None and frame.loc[[2, 3], "BLEU-1"].isna().all()
    assert frame["CLIP-S"].notna().all()
    statuses = {a["metric"]: a["status"] for a in outcome.availability}
    said = "no value for #2, #3: no references in that row (each row takes its own)"
    assert statuses["BLEU-1"] == f"available; {said}"
    assert statuses["RefCLIP-S"].startswith(f"available; {said}")  # (then its clipped-to-0 count)
    assert "no value" not in statuses["CLIP-S"]
    assert "_has_references" not in outcome.frame.columns


def test_an_uploaded_row_without_an_image_means_every_image_as_in_the_table(tmp_path):
    """The rows table says "image file name (empty: every image)"; an uploaded file's row with
    an empty image was refused ("no image given"). `caplens score` still asks for one."""
    from scoring.corpus.manifest import read_score_rows
    from scoring.session_scoring import rows_from_files

    path = tmp_path / "rows.csv"
    path.write_text("image,caption,references\n,a red ball on grass,a red ball lying on grass | a ball\n"
                    "red.png,a red square,\n", encoding="utf-8")
    assert rows_from_files([path]) == ([["", "a red ball on grass", "a red ball lying on grass | a ball"],
                                        ["red.png", "a red square", ""]], [])
    assert [row.problem for row in read_score_rows([path])] == ["no image given", None]
