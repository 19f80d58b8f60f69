"""Rendering helpers: highlighted spans cover the caption exactly; user text reaches Plotly inert."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.render import CHANGED, REMOVAL_MARK, REMOVED, highlight_spans, plotly_text

XSS = "<img src=x onerror=alert(1)>"


def test_highlight_marks_exactly_the_changed_spans():
    text = "a dog dog runs"
    segments = highlight_spans(text, [(6, 9)])
    assert segments == [("a dog ", None), ("dog", CHANGED), (" runs", None)]


@given(st.text(max_size=40), st.lists(st.tuples(st.integers(-5, 50), st.integers(-5, 50)), max_size=6))
def test_segments_always_concatenate_to_the_text(text, spans):
    segments = highlight_spans(text, spans)
    assert "".join(part for part, _ in segments) == text
    for part, label in segments:
        assert label in (None, CHANGED)


def test_removals_show_a_marker_where_words_were():
    text = "a runs fast"
    segments = highlight_spans(text, [(2, 2), (7, 11)], mark_removals=True)
    assert segments == [("a ", None), (REMOVAL_MARK, REMOVED), ("runs ", None), ("fast", CHANGED)]
    plain = "".join(part for part, label in segments if label != REMOVED)
    assert plain == text


def test_plotly_labels_escape_markup():
    assert "<" not in plotly_text(XSS) and "&lt;img" in plotly_text(XSS)


def test_score_table_puts_the_status_beside_the_metric_and_the_chart_names_series_by_caption():
    import pandas as pd

    from app.render import score_tables, scores_bar_chart, status_cell

    frame = pd.DataFrame([
        {"#": 1, "image": "a.png", "caption": "a dog runs across a very long stretch of green grass", "lang": "en",
         "CLIP-S": 0.5, "truncated by": ""},
        {"#": 2, "image": "a.png", "caption": "<b>two</b> cats", "lang": "en", "CLIP-S": 0.25, "truncated by": ""},
        {"#": 3, "image": "b.png", "caption": "<b>two</b> cats", "lang": "en", "CLIP-S": 0.75, "truncated by": ""},
        {"#": 4, "image": "b.png", "caption": "a dog runs across a very long stretch of sand", "lang": "en",
         "CLIP-S": 0.1, "truncated by": ""},
    ])
    _, per_metric = score_tables(frame, ["CLIP-S"], [{"metric": "CLIP-S", "backbone": "clip", "status": "available"}])
    assert list(per_metric.columns) == ["metric", "status", "#1", "#2", "#3", "#4", "backbone", "status in words"]
    assert per_metric.iloc[0].tolist() == ["CLIP-S", status_cell("available"), 0.5, 0.25, 0.75, 0.1, "clip",
                                           "available"]
    names = [trace.name for trace in scores_bar_chart(frame, ["CLIP-S"], "t").data]
    # Every series by its row's number, as the tables' columns name it, even where the shortened
    # captions differ (a legend that numbered only look-alikes read as if rows were missing).
    assert names == ["#1 a dog runs across a very long s…", "#2 &lt;b&gt;two&lt;/b&gt; cats (a.png)",
                     "#3 &lt;b&gt;two&lt;/b&gt; cats (b.png)", "#4 a dog runs across a very long s…"]


def test_long_image_names_are_shortened_in_the_scored_pairs_table():
    import pandas as pd

    from app.render import score_tables, short_image_name

    digest = "3f" * 32
    assert short_image_name(f"{digest}.png") == "3f3f3f3f3f3f….png"
    assert short_image_name("cat.png") == "cat.png"
    long = "a_very_long_original_file_name_from_a_camera_2026_11_24.jpeg"
    short = short_image_name(long)
    assert len(short) == 28 and short.startswith("a_very_long_ori") and short.endswith("_24.jpeg") and "…" in short
    frame = pd.DataFrame([{"#": 1, "image": f"{digest}.png", "caption": "a dog", "lang": "en", "CLIP-S": 0.5,
                           "truncated by": ""}])
    pairs, _ = score_tables(frame, ["CLIP-S"], [{"metric": "CLIP-S", "status": "available", "backbone": "b"}])
    assert pairs["image"].tolist() == ["3f3f3f3f3f3f…\u200b.png"] and frame["image"][0] == f"{digest}.png"


def test_a_scored_pairs_image_name_may_wrap_after_its_underscores_and_ellipsis():
    """A browser never wraps a name at an underscore: at 390 px "sunset_panorama_IMG8842.png"
    broke inside "panorama" (tests/app/test_app_browser_views.py sees it drawn). The cell marks
    the places with zero-width spaces; the name is otherwise the same."""
    import pandas as pd

    from app.render import score_tables, wrappable_name

    assert wrappable_name("sunset_panorama_IMG8842.png") == "sunset_\u200bpanorama_\u200bIMG8842.png"
    assert wrappable_name("red.png") == "red.png" and wrappable_name("a cat-photo.png") == "a cat-photo.png"
    assert wrappable_name("x_") == "x_"  # nothing after the last part
    frame = pd.DataFrame([{"#": 1, "image": "sunset_panorama_IMG8842.png", "caption": "a dog", "lang": "en",
                           "CLIP-S": 0.5, "truncated by": ""}])
    pairs, _ = score_tables(frame, ["CLIP-S"], [{"metric": "CLIP-S", "status": "available", "backbone": "b"}])
    assert pairs["image"].tolist() == ["sunset_\u200bpanorama_\u200bIMG8842.png"]
    assert frame["image"][0] == "sunset_panorama_IMG8842.png"  # the scored frame keeps the name as given


def test_table7_columns_are_wide_enough_for_their_headers():
    from app.render import column_widths

    widths = column_widths(["metric", "Original", "Robustness", "Substitution", "status"])
    assert widths == ["156px", "156px", "156px", "156px", "280px"]
    assert column_widths(["a_very_long_header_word_here"]) == [f"{28 * 8 + 28}px"]
    assert column_widths(["metric", "status", "status in words"], wide=("status in words",), icons=("status",)) == [
        "156px", "72px", "280px"]


def test_removal_shows_the_removed_words_struck_through():
    """Every removed word is back in its place, struck through: the segments read as the parent
    caption once the strokes are taken out (before, each gap was a bare mark)."""
    from app.render import perturbation_segments, struck
    from scoring.perturb.ops import perturb, removed_words

    parent = "a man in a white shirt rides a brown horse on the beach"
    first = perturb(parent, "removal", seed=0)
    assert first.text == "a a beach"  # the first "a" went too: the kept ones are the 4th and 8th words
    assert removed_words(first) == ["a man in", "white shirt rides", "brown horse on the"]
    assert perturbation_segments(first) == [(struck("a man in") + " ", REMOVED), ("a ", None),
                                            (struck("white shirt rides") + " ", REMOVED), ("a ", None),
                                            (struck("brown horse on the") + " ", REMOVED), ("beach", None)]
    for seed in range(12):  # (seed 5 keeps two words, seed 1 removes the last three)
        removal = perturb(parent, "removal", seed=seed)
        segments = perturbation_segments(removal)
        assert REMOVAL_MARK not in [text for text, _ in segments]
        assert "".join(text for text, _ in segments).replace("\u0336", "").split() == parent.split(), seed
        kept = "".join(text for text, label in segments if label != REMOVED)
        assert kept.split() == removal.text.split()
    assert removed_words(perturb(parent, "jumble", seed=0)) == []


def test_status_icons_carry_the_words_escaped_and_pictures_take_only_image_data_uris():
    import pandas as pd
    import pytest

    from app.render import picture_cell, score_tables, status_cell

    assert status_cell("available") == ('<span title="available" aria-label="available" '
                                        'style="color:#15803d;font-weight:bold">✓</span>')
    unavailable = status_cell("unavailable: no checkpoint")
    assert unavailable.startswith('<span title="unavailable: no checkpoint"') and unavailable.endswith(">✗</span>")
    assert status_cell("available (needs an image for these rows)").endswith(">⚠</span>")
    # A collection's name (user text) in a note: escaped into the attribute, never markup.
    note = status_cell(f"available; document frequencies from collection '{XSS}\"'")
    assert note.endswith(">⚠</span>") and "<img" not in note and "&lt;img" in note and "&quot;" in note
    uri = "data:image/jpeg;base64,/9j/4AAQ+/=="
    assert picture_cell(uri) == f'<img src="{uri}" alt="" style="max-height:56px;max-width:72px;display:block">'
    assert picture_cell(None) == picture_cell("") == ""
    for bad in ('data:image/jpeg;base64,abc" onerror="alert(1)', "https://example.com/a.png", XSS):
        with pytest.raises(ValueError, match="a picture cell takes a base64 image data URI only"):
            picture_cell(bad)
    frame = pd.DataFrame([{"#": 1, "image": "a.png", "caption": "a dog", "lang": "en", "CLIP-S": 0.5,
                           "truncated by": ""},
                          {"#": 2, "image": "b.png", "caption": "a cat", "lang": "en", "CLIP-S": 0.4,
                           "truncated by": ""}])
    pairs, _ = score_tables(frame, ["CLIP-S"], [{"metric": "CLIP-S", "status": "available", "backbone": "b"}],
                            {"a.png": uri})
    assert list(pairs.columns) == ["#", "picture", "image", "caption", "lang", "truncated by"]
    assert pairs["picture"].tolist() == [picture_cell(uri), ""]  # b.png has no picture given


def test_the_chart_draws_each_score_as_a_share_of_its_metrics_range():
    """CIDEr-D 10 (its maximum) no longer flattens BLEU-1 0.5 and CLIP-S 1.25 (half of w = 2.5):
    all three are drawn against their own maximum, and the hover keeps the score itself."""
    import pandas as pd

    from app.render import scores_bar_chart

    frame = pd.DataFrame([{"#": 1, "image": "a.png", "caption": "a dog", "lang": "en", "CIDEr": 10.0, "BLEU-1": 0.5,
                           "CLIP-S": 1.25, "truncated by": ""}])
    ranges = {"CIDEr": (0.0, 10.0), "BLEU-1": (0.0, 1.0), "CLIP-S": (0.0, 2.5)}
    [bars] = scores_bar_chart(frame, ["CIDEr", "BLEU-1", "CLIP-S"], "t", ranges).data
    assert list(bars.y) == pytest.approx([1.0, 0.5, 0.5])
    assert [list(c) for c in bars.customdata] == [[10.0, 10.0], [0.5, 1.0], [1.25, 2.5]]
    [plain] = scores_bar_chart(frame, ["CIDEr", "BLEU-1"], "t").data  # no ranges: the scores themselves
    assert list(plain.y) == [10.0, 0.5]


def test_a_result_table_is_shown_to_four_places_and_kept_whole_elsewhere():
    import pandas as pd

    from app.render import rounded_table

    table = pd.DataFrame({"metric": ["CLIP-S"], "kendall_c": [0.5257142857142857], "n": [162]})
    shown = rounded_table(table)
    assert shown.to_dict("records") == [{"metric": "CLIP-S", "kendall_c": 0.5257, "n": 162}]
    assert table["kendall_c"].iloc[0] == 0.5257142857142857 and rounded_table(None) is None


def test_status_notes_list_each_metric_with_a_note_or_unavailable_in_words():
    """The Score tab's notes under the table (the words column is off-screen on a phone): one line
    per ⚠ or ✗ metric, none for plain "available", user-reachable text shown as itself."""
    from app.render import md_escape, status_notes

    notes = status_notes([
        {"metric": "CLIP-S", "status": "available"},
        {"metric": "CIDEr", "status": "not meaningful: document frequencies from the references of one image"},
        {"metric": "my_metric*", "status": "unavailable: no file at <b>here</b>"},
    ])
    assert notes.splitlines() == [
        "- ⚠ **CIDEr**: not meaningful: document frequencies from the references of one image",
        "- ✗ **my\\_metric\\***: unavailable: no file at \\<b\\>here\\</b\\>",
    ]
    assert status_notes([{"metric": "BLEU-4", "status": "available"}]) == ""
    made_for = "available; made for en: 2 of 3 caption(s) are in de, fr"
    assert status_notes([{"metric": "CLIP-S", "status": made_for}, {"metric": "BLEU-4", "status": "available"},
                         {"metric": "PAC-S", "status": made_for}]) == (
        f"- ⚠ **{md_escape('CLIP-S')}, {md_escape('PAC-S')}**: {md_escape(made_for)}")
    assert md_escape("[x](javascript:y) #1") == "\\[x\\]\\(javascript:y\\) \\#1"
