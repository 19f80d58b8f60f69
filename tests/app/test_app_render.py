"""Rendering helpers: highlighted spans cover the caption exactly; user text reaches Plotly inert."""
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
