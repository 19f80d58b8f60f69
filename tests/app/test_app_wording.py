"""One spelling: the tab, its buttons, its messages and the docs say "Analyze" (the CLI's
`caplens analyze`), never "Analyse"."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BRITISH = re.compile(r"\b[Aa]nalys(e|ed|ing)\b")  # "analyses", the plural noun, is spelled alike


def test_analyze_is_spelled_one_way_in_the_code_the_cli_and_the_docs():
    """The tabs, every CLI help text (the new-user trial found "Analyse metric scores" in
    `caplens analyze --help`) and every docstring, README and docs page."""
    files = [*sorted(p for package in ("app", "annotation", "scoring", "db") for p in (ROOT / package).rglob("*.py")),
             ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in files
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if BRITISH.search(line)]
    assert found == []



def test_the_docs_count_the_mcp_tools_the_server_has():
    """README and docs/app.md said "seven endpoints" after `next_pair` and `judge_pair` made nine."""
    from app.api import ENDPOINTS

    words = {7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}
    said = [(path.name, m.group(1)) for path in (ROOT / "README.md", ROOT / "docs" / "app.md")
            for m in re.finditer(r"(\w+) endpoints (?:become MCP tools|above, named after them)",
                                 " ".join(path.read_text(encoding="utf-8").split()))]
    assert said and all(word == words[len(ENDPOINTS)] for _, word in said), said

def test_the_api_table_of_the_docs_has_a_row_for_every_endpoint():
    """docs/app.md listed seven of the nine endpoints (a trial looked for /next_pair there)."""
    from app.api import ENDPOINTS

    rows = re.findall(r"^\| `/(\w+)` \|", (ROOT / "docs" / "app.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert sorted(set(rows)) == sorted(ENDPOINTS)


def test_no_table_shows_placeholder_headers_before_it_is_filled(tmp_path, monkeypatch):
    """Gradio draws an empty Dataframe with the headers "1 | 2 | 3": every table of the app has
    its own headers from the start, or stays hidden until it has a result."""
    import gradio as gr

    from app.engine import AppContext
    from app.ui import build_app

    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    demo = build_app(AppContext(profile="tiny", banner="", console=""))
    tables = [block for block in demo.blocks.values() if isinstance(block, gr.Dataframe)]
    assert len(tables) >= 15
    placeholder = [(t.elem_id, t.label) for t in tables if t.visible and t.value["headers"][:3] == ["1", "2", "3"]]
    assert placeholder == []
    by_id = {t.elem_id: t.value["headers"] for t in tables}
    assert by_id["score-items"] == ["#", "picture", "image", "caption", "lang", "truncated by"]
    assert by_id["failures-table"][:5] == ["metric", "lang", "metric score", "human", "rank gap"]
    assert by_id["analyze-correlations"][:4] == ["lang", "metric", "n", "Kendall τc"]
