"""One spelling: the tab, its buttons, its messages and the docs say "Analyze" (the CLI's
`caplens analyze`), never "Analyse"."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BRITISH = re.compile(r"\b[Aa]nalys(e|ed|ing)\b")  # "analyses", the plural noun, is spelled alike


def test_analyze_is_spelled_one_way_in_the_tabs_and_the_docs():
    files = [*sorted((ROOT / "app" / "tabs").glob("*.py")), ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in files
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if BRITISH.search(line)]
    assert found == []
