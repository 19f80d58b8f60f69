"""The CapLens data directory and its config.toml: the one place that resolves them.

`--data-dir` (the CLI copies it into `CAPLENS_DATA_DIR`), then `CAPLENS_DATA_DIR`, then
`~/.caplens`. Registry paths, tiny checkpoints, the database file and the image store all
live under it; the database package receives the resulting paths from its callers.

`<data dir>/config.toml` holds settings: `[database] url` (annotation.database) and the
`[limits]` table of size limits on what users send (:func:`configured_limit`), among them
the length of one caption (:func:`check_caption_length`), checked before any work on it.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Callable

CONFIG_FILE_NAME = "config.toml"
LIMITS_TABLE = "limits"
# The longest caption (or reference, or text to perturb, or caption stored) accepted: about
# 800 English words, beyond the longest "detailed" captions, and about a second for all five
# perturbations.
DEFAULT_CAPTION_MAX_CHARS = 5_000
_config_cache: dict[Path, tuple[int, dict]] = {}


def data_dir(create: bool = False) -> Path:
    """The data directory; `create=True` makes it on first use, for writers."""
    configured = os.environ.get("CAPLENS_DATA_DIR")
    path = Path(configured).expanduser() if configured else Path.home() / ".caplens"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def config_file() -> Path:
    return data_dir() / CONFIG_FILE_NAME


def read_config() -> dict:
    """The parsed `config.toml` of the data directory ({} when there is none); read again
    only when the file changes."""
    path = config_file()
    try:
        changed = path.stat().st_mtime_ns
    except (FileNotFoundError, NotADirectoryError):
        return {}
    cached = _config_cache.get(path)
    if cached is not None and cached[0] == changed:
        return cached[1]
    try:
        with path.open("rb") as handle:
            config = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    _config_cache[path] = (changed, config)
    return config


def configured_limit(name: str, default: int | float) -> int | float:
    """Limit `name`: `$CAPLENS_<NAME>`, else `name` in config.toml's `[limits]`, else `default`.
    A limit must be a positive number (ValueError naming where it was set)."""
    variable = f"CAPLENS_{name.upper()}"
    raw = os.environ.get(variable)
    where = f"${variable}"
    if raw is None or not raw.strip():
        table = read_config().get(LIMITS_TABLE, {})
        if not isinstance(table, dict):
            raise ValueError(f"{config_file()}: [{LIMITS_TABLE}] must be a table")
        if name not in table:
            return default
        raw, where = table[name], f"{config_file()}: [{LIMITS_TABLE}] {name}"
    kind = "number" if isinstance(default, float) else "whole number"
    try:
        value = float(raw) if isinstance(default, float) else int(str(raw).strip().replace("_", ""))
    except ValueError:
        raise ValueError(f"{where}: {raw!r} is not a {kind}") from None
    if value <= 0 or isinstance(raw, bool):
        raise ValueError(f"{where}: must be a positive number, not {raw!r}")
    return value


class TextTooLong(ValueError):
    """A text over its configured length; the message names the field and the limit."""


def caption_max_chars() -> int:
    """The longest caption accepted: `$CAPLENS_CAPTION_MAX_CHARS`, else `caption_max_chars` in
    config.toml's `[limits]`, else DEFAULT_CAPTION_MAX_CHARS."""
    return configured_limit("caption_max_chars", DEFAULT_CAPTION_MAX_CHARS)


def check_caption_length(text: str, field: str) -> str:
    """`text` unchanged, or TextTooLong when it is longer than :func:`caption_max_chars`."""
    limit = caption_max_chars()
    if len(text) > limit:
        raise TextTooLong(f"{field}: {len(text):,} characters; the limit is {limit:,} per caption "
                          f"(the server's caption_max_chars setting).")
    return text


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """`write(temporary)` then a rename onto `path`: a reader (or a run killed half-way) never sees
    half a file. The temporary name carries the process id, so two writers of one path never
    share it."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
