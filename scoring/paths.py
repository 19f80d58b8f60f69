"""The CapLens data directory: the one place that resolves it.

`--data-dir` (the CLI copies it into `CAPLENS_DATA_DIR`), then `CAPLENS_DATA_DIR`, then
`~/.caplens`. Registry paths, tiny checkpoints, the database file and the image store all
live under it; the database package receives the resulting paths from its callers.
"""
from __future__ import annotations

import os
from pathlib import Path


def data_dir(create: bool = False) -> Path:
    """The data directory; `create=True` makes it on first use, for writers."""
    configured = os.environ.get("CAPLENS_DATA_DIR")
    path = Path(configured).expanduser() if configured else Path.home() / ".caplens"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
