"""Published benchmarks kept on the server, reproduced from the app (issue 26): the Analyze tab
offers what `caplens analyze reproduce` does, for a researcher or admin, on the files an admin
put under <data dir>/benchmarks (where `caplens analyze fetch NAME` downloads them), plus the
synthetic world's benchmark. Only benchmarks found there can be named, so a request never
reaches another server path; results and scores stay under <data dir>/reproduce/<name>, so a
second run resumes instead of scoring again.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.people.acting import acting
from scoring.analysis.reproduce import (Reproduction, find_benchmarks, format_table, reproduce, reproduce_world,
                                        summary_line, write_results)
from scoring.paths import data_dir

WORLD = "world"
TABLE_COLUMNS = ["benchmark", "metric", "coefficient", "ours", "95% interval", "n", "paper", "difference", "±0.1",
                 "note"]  # the app's table: `format_table`'s columns, the benchmark first
WORLD_SCENES = 12  # as `caplens analyze reproduce world`'s default
_running: set[str] = set()
_running_lock = threading.Lock()


def benchmark_folder() -> Path:
    return data_dir() / "benchmarks"


def _require_researcher(account_id: int | None) -> None:
    with acting(account_id, read_only=True) as (_, user):
        require_role(user, *RESEARCH_ROLES)


def _found() -> dict[str, Path]:
    folder = benchmark_folder()
    return find_benchmarks(folder) if folder.is_dir() else {}


def server_benchmarks(account_id: int | None) -> list[str]:
    """The benchmarks this server can reproduce: those whose files are under the benchmark
    folder, then the world's (always there: it is generated)."""
    _require_researcher(account_id)
    return [*sorted(_found()), WORLD]


@dataclass(frozen=True)
class ServerReproduction:
    """What the app shows: one line per benchmark run and the ours-versus-paper table."""

    summary: str
    table: pd.DataFrame
    results: tuple[Reproduction, ...]


def reproduce_on_server(account_id: int | None, name: str, profile: str | None = None,
                        metrics: Sequence[str] | None = None, n_boot: int = 1000) -> ServerReproduction:
    """Reproduce benchmark `name` (one of :func:`server_benchmarks`) with `profile` (the world's
    own for "world"), write results.csv / results.md beside its scores, and return the table."""
    _require_researcher(account_id)
    if not name:
        raise ValueError("Choose a benchmark.")
    found = _found()
    if name != WORLD and name not in found:
        raise LookupError(f"{name}: its files are not in the server's benchmark folder; an admin downloads them "
                          f"with `caplens analyze fetch {name}` or copies them there (see docs/analysis.md).")
    with _running_lock:
        if name in _running:
            raise ValueError(f"{name} is being reproduced already; its table appears when that run ends.")
        _running.add(name)
    try:
        out = data_dir(create=True) / "reproduce" / name
        options = dict(metrics=list(metrics) if metrics else None, n_boot=n_boot)
        if name == WORLD:
            _, results = reproduce_world(out, scenes=WORLD_SCENES, profile=None, **options)
            folders = [out / r.benchmark for r in results]
        else:
            results = [reproduce(name, found[name], out=out, profile=profile, **options)]
            folders = [out]
        for result, folder in zip(results, folders):
            write_results(result, folder)
    finally:
        with _running_lock:
            _running.discard(name)
    table = pd.concat([format_table(r.table).rename(columns={"": "±0.1"}).assign(benchmark=r.benchmark)
                       for r in results], ignore_index=True)
    table = table[TABLE_COLUMNS]
    return ServerReproduction(" ".join(summary_line(r) for r in results), table, tuple(results))
