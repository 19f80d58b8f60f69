"""Bradley–Terry ranking of caption sources (systems) from pairwise judgments.

Each judgment compares a caption of system i with one of system j: i wins, j wins, or a tie
(counted as half a win for each, as in Davidson's simplification). The Bradley–Terry model
says P(i beats j) = p_i / (p_i + p_j); its maximum-likelihood strengths are found with
Hunter's (2004) MM iteration p_i <- W_i / sum_j n_ij / (p_i + p_j), where W_i is i's wins
and n_ij the number of comparisons of i with j. Strengths are reported as shares that sum to
1 (so with two systems p_i / p_j is exactly W_i / W_j). A system that never wins has strength
0; one that never loses has no finite maximum and tends to 1 (the iteration stops at
`max_iter`).

Intervals are percentile-bootstrap 95 % intervals that resample whole clusters (the judged
pairs: the judgments of one pair are not independent) with replacement. Nothing here reads
files or the database.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from .correlation import _bootstrap_indices

BT_COLUMNS = ["rank", "system", "strength", "low", "high", "wins", "comparisons"]


def _fit(wins: np.ndarray, games: np.ndarray, max_iter: int, tol: float) -> np.ndarray:
    """MM iteration on win totals `wins` (per system, shape (n,) or (B, n)) and the symmetric
    count matrices `games` ((n, n) or (B, n, n)): B fits at once, each stopping on its own
    when no share moves by `tol`, so a bootstrap's resamples cost one loop, not B."""
    single = np.ndim(wins) == 1
    wins, games = np.atleast_2d(wins), games.reshape((-1,) + games.shape[-2:])
    n = wins.shape[1]
    p = np.full(wins.shape, 1.0 / n)
    played = games.sum(axis=2) > 0
    fitted = np.full(wins.shape, np.nan)
    active = np.arange(wins.shape[0])
    for _ in range(max_iter):
        if active.size == 0:
            break
        current, counts = p[active], games[active]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(counts > 0, counts / (current[:, :, None] + current[:, None, :]), 0.0)
        denominator = ratio.sum(axis=2)
        new = np.where(played[active] & (denominator > 0),
                       wins[active] / np.where(denominator > 0, denominator, 1.0), 0.0)
        total = new.sum(axis=1)
        alive = total > 0  # a fit whose shares all vanish stays NaN
        new[alive] /= total[alive, None]
        done = alive & (np.max(np.abs(new - current), axis=1) < tol)
        fitted[active[done]] = new[done]
        going = alive & ~done
        p[active[going]] = new[going]
        active = active[going]
    fitted[active] = p[active]  # max_iter reached: the last iterate
    return fitted[0] if single else fitted


def _tallies(index_a: np.ndarray, index_b: np.ndarray, outcome: np.ndarray, weight: np.ndarray,
             n: int) -> tuple[np.ndarray, np.ndarray]:
    wins = np.zeros(n)
    np.add.at(wins, index_a, weight * outcome)
    np.add.at(wins, index_b, weight * (1.0 - outcome))
    games = np.zeros((n, n))
    np.add.at(games, (index_a, index_b), weight)
    np.add.at(games, (index_b, index_a), weight)
    return wins, games


def bradley_terry(first: Sequence, second: Sequence, outcome: Sequence[float], *, max_iter: int = 10_000,
                  tol: float = 1e-12) -> dict:
    """Strength share of every system, {system: share}, from comparisons (first[k],
    second[k]) with outcome[k] = 1 (first wins), 0 (second wins) or 0.5 (tie)."""
    systems, index_a, index_b, result = _encoded(first, second, outcome)
    wins, games = _tallies(index_a, index_b, result, np.ones(result.size), len(systems))
    return dict(zip(systems, _fit(wins, games, max_iter, tol).tolist()))


def _encoded(first, second, outcome):
    first, second = [str(s) for s in first], [str(s) for s in second]
    result = np.asarray(outcome, dtype=float)
    if not (len(first) == len(second) == result.size):
        raise ValueError("first, second and outcome must have one entry per comparison")
    if result.size == 0:
        raise ValueError("no comparisons to rank")
    if np.isnan(result).any() or not np.isin(result, (0.0, 0.5, 1.0)).all():
        raise ValueError("each outcome is 1 (first wins), 0 (second wins) or 0.5 (tie)")
    if any(a == b for a, b in zip(first, second)):
        raise ValueError("a system cannot be compared with itself")
    systems = sorted(set(first) | set(second))
    code = {s: i for i, s in enumerate(systems)}
    return (systems, np.array([code[s] for s in first]), np.array([code[s] for s in second]), result)


@dataclass
class Ranking:
    """`table`: one row per system (BT_COLUMNS), strongest first; `n_clusters` resampled."""

    table: pd.DataFrame
    n_clusters: int
    n_boot: int


def bradley_terry_ranking(first: Sequence, second: Sequence, outcome: Sequence[float],
                          clusters: Sequence | None = None, *, n_boot: int = 1000, seed: int = 0,
                          confidence: float = 0.95, max_iter: int = 2_000, tol: float = 1e-10) -> Ranking:
    """Bradley–Terry strength shares with percentile-bootstrap intervals over `clusters`
    (default: every comparison its own cluster), ranked strongest first; wins count ties as
    half. A resample in which a system does not occur leaves it out of that sample."""
    systems, index_a, index_b, result = _encoded(first, second, outcome)
    n = len(systems)
    ones = np.ones(result.size)
    wins, games = _tallies(index_a, index_b, result, ones, n)
    point = _fit(wins, games, max_iter * 5, tol)
    if clusters is None:  # every comparison its own cluster, drawn by its position
        labels = members = np.arange(result.size)
    else:
        labels, members = np.unique(np.asarray(clusters).astype(str), return_inverse=True)
        if members.size != result.size:
            raise ValueError("clusters must have one entry per comparison")
    low = high = np.full(n, np.nan)
    if n_boot > 0 and labels.size >= 2:
        tallies = [_tallies(index_a, index_b, result, np.bincount(draw, minlength=labels.size)[members].astype(float), n)
                   for draw in _bootstrap_indices(labels.size, n_boot, seed)]
        w, g = np.stack([t[0] for t in tallies]), np.stack([t[1] for t in tallies])
        samples = np.where(g.sum(axis=2) > 0, _fit(w, g, max_iter, tol), np.nan)
        tail = (1.0 - confidence) / 2.0 * 100.0
        with np.errstate(all="ignore"):
            low, high = np.nanpercentile(samples, [tail, 100.0 - tail], axis=0)
    table = pd.DataFrame({"system": systems, "strength": point, "low": low, "high": high, "wins": wins,
                          "comparisons": games.sum(axis=1).astype(int)})
    table = table.sort_values(["strength", "system"], ascending=[False, True], kind="stable").reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, n + 1))
    return Ranking(table[BT_COLUMNS], int(labels.size), n_boot)
