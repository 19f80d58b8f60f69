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
pairs: the judgments of one pair are not independent) with replacement, within each compared
pair of systems (a stratified bootstrap): every pair of systems keeps its number of clusters
in every resample, so every system that was compared is in every resample, the comparison
graph stays the same and every resample's shares are the same quantity as the point estimate
(shares over the same systems). Resampling all clusters together let a rarely compared system
drop out of some resamples, whose shares were then renormalised over the others, mixing two
scales in one interval. Holding the number of comparisons per pair of systems fixed is the
design of a pairwise study (which pairs are made is chosen, not sampled); the interval
reflects the variability of the judgments given that design.

Bradley–Terry strengths compare only systems linked by a chain of comparisons. When the
comparison graph falls into several groups never compared with one another, each group is
fitted on its own, its shares sum to 1 within the group, the table has the group of every
system (`group`, ranks counted within it) and `Ranking.warning` says so: an order across
groups would be an artefact. Nothing here reads files or the database.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd


BT_COLUMNS = ["rank", "system", "strength", "low", "high", "wins", "comparisons", "group"]


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
    second[k]) with outcome[k] = 1 (first wins), 0 (second wins) or 0.5 (tie). Systems never
    linked by a chain of comparisons are fitted group by group, shares summing to 1 within each
    group (`components`): one fit over all would put the groups on an arbitrary common scale."""
    systems, index_a, index_b, result = _encoded(first, second, outcome)
    wins, games = _tallies(index_a, index_b, result, np.ones(result.size), len(systems))
    return dict(zip(systems, _fit_groups(wins, games, components(games), max_iter, tol).tolist()))


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


def components(games: np.ndarray) -> list[np.ndarray]:
    """The groups of systems linked by chains of comparisons in the symmetric count matrix
    `games` (n, n), each as sorted indices, ordered by their smallest index."""
    n = games.shape[0]
    group = np.full(n, -1)
    found = []
    for start in range(n):
        if group[start] >= 0:
            continue
        group[start], stack, members = len(found), [start], [start]
        while stack:
            i = stack.pop()
            for j in np.flatnonzero(games[i] > 0):
                if group[j] < 0:
                    group[j] = len(found)
                    stack.append(j)
                    members.append(j)
        found.append(np.array(sorted(members)))
    return found


def _fit_groups(wins: np.ndarray, games: np.ndarray, groups: list[np.ndarray], max_iter: int,
                tol: float) -> np.ndarray:
    """`_fit` of each group of systems on its own (shares summing to 1 within each group)."""
    fitted = np.full(wins.shape, np.nan)
    for members in groups:
        fitted[..., members] = _fit(wins[..., members], games[..., members[:, None], members[None, :]],
                                    max_iter, tol)
    return fitted


@dataclass
class Ranking:
    """`table`: one row per system (BT_COLUMNS), strongest first within each group of systems
    compared with one another (`group`, numbered from 1; ranks count within a group);
    `n_clusters` resampled; `groups`: the systems of each group; `warning`: why the ranking
    cannot be read across groups when there are several (None when all are linked)."""

    table: pd.DataFrame
    n_clusters: int
    n_boot: int
    groups: list[list[str]] = field(default_factory=list)
    warning: str | None = None


def _strata(index_a: np.ndarray, index_b: np.ndarray, members: np.ndarray, n_clusters: int) -> list[np.ndarray]:
    """Clusters grouped by the pairs of systems their comparisons compare (a judged caption
    pair compares one pair of systems), as arrays of cluster indices in a fixed order."""
    pairs: list[set] = [set() for _ in range(n_clusters)]
    for a, b, cluster in zip(index_a.tolist(), index_b.tolist(), members.tolist()):
        pairs[cluster].add((min(a, b), max(a, b)))
    by_key: dict[tuple, list[int]] = {}
    for cluster, key in enumerate(pairs):
        by_key.setdefault(tuple(sorted(key)), []).append(cluster)
    return [np.array(by_key[key]) for key in sorted(by_key)]


def _stratified_counts(strata: list[np.ndarray], n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_clusters) times each cluster is drawn: each stratum's clusters resampled
    with replacement among themselves, as many as it has (with one stratum the draws are
    `correlation._bootstrap_indices`' draws)."""
    rng = np.random.default_rng(seed)
    counts = np.zeros((n_boot, n_clusters))
    rows = np.arange(n_boot)[:, None]
    for stratum in strata:
        np.add.at(counts, (rows, stratum[rng.integers(0, stratum.size, size=(n_boot, stratum.size))]), 1.0)
    return counts


def bradley_terry_ranking(first: Sequence, second: Sequence, outcome: Sequence[float],
                          clusters: Sequence | None = None, *, n_boot: int = 1000, seed: int = 0,
                          confidence: float = 0.95, max_iter: int = 2_000, tol: float = 1e-10) -> Ranking:
    """Bradley–Terry strength shares with percentile-bootstrap intervals over `clusters`
    (default: every comparison its own cluster), ranked strongest first; wins count ties as
    half. Clusters are resampled within each compared pair of systems (see the module's
    docstring), so every resample has every system. When the systems fall into groups never
    compared with one another, each group is fitted and ranked on its own and `warning` says
    so. No interval (NaN) when no pair of systems has two clusters to resample."""
    systems, index_a, index_b, result = _encoded(first, second, outcome)
    n = len(systems)
    ones = np.ones(result.size)
    wins, games = _tallies(index_a, index_b, result, ones, n)
    groups = components(games)
    point = _fit_groups(wins, games, groups, max_iter * 5, tol)
    if clusters is None:  # every comparison its own cluster, drawn by its position
        labels = members = np.arange(result.size)
    else:
        labels, members = np.unique(np.asarray(clusters).astype(str), return_inverse=True)
        if members.size != result.size:
            raise ValueError("clusters must have one entry per comparison")
    strata = _strata(index_a, index_b, members, labels.size)
    low = high = np.full(n, np.nan)
    if n_boot > 0 and max(stratum.size for stratum in strata) >= 2:
        counts = _stratified_counts(strata, labels.size, n_boot, seed)
        tallies = [_tallies(index_a, index_b, result, row[members], n) for row in counts]
        w, g = np.stack([t[0] for t in tallies]), np.stack([t[1] for t in tallies])
        samples = np.where(g.sum(axis=2) > 0, _fit_groups(w, g, groups, max_iter, tol), np.nan)
        tail = (1.0 - confidence) / 2.0 * 100.0
        with np.errstate(all="ignore"):
            low, high = np.nanpercentile(samples, [tail, 100.0 - tail], axis=0)
    group_of = np.empty(n, dtype=int)
    for number, group in enumerate(groups, 1):
        group_of[group] = number
    table = pd.DataFrame({"system": systems, "strength": point, "low": low, "high": high, "wins": wins,
                          "comparisons": games.sum(axis=1).astype(int), "group": group_of})
    table = table.sort_values(["group", "strength", "system"], ascending=[True, False, True],
                              kind="stable").reset_index(drop=True)
    table.insert(0, "rank", table.groupby("group").cumcount().to_numpy() + 1)
    names = [[systems[i] for i in group] for group in groups]
    warning = None
    if len(groups) > 1:
        warning = (f"The sources fall into {len(groups)} groups never compared with one another ("
                   + "; ".join(f"group {k}: {', '.join(g)}" for k, g in enumerate(names, 1))
                   + "): Bradley–Terry strengths compare sources only within a group, so each group is ranked on "
                   "its own and its shares sum to 1; no order across groups can be read from these judgments "
                   "(pair captions of sources of different groups to link them).")
    return Ranking(table[BT_COLUMNS], int(labels.size), n_boot, names, warning)
