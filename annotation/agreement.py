"""Inter-annotator agreement: Krippendorff's alpha (interval) and pairwise correlations."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.accounts import RESEARCH_ROLES, require_role
from annotation.captions import in_collection
from annotation.tasks import RATING_FIELDS
from db.models import Caption, Collection, Rating, User

if TYPE_CHECKING:
    import numpy


def krippendorff_alpha_interval(reliability) -> float:
    """Krippendorff's alpha with the interval metric (squared differences).

    `reliability` is coders x units with NaN where a coder gave no value. Units with fewer
    than two values are not pairable and are ignored. Returns NaN when there is no
    variation to judge agreement against.
    """
    import numpy as np

    data = np.asarray(reliability, dtype=float)
    if data.ndim != 2:
        raise ValueError("reliability data must be a 2-D array (coders x units)")
    observed_sum, pairable = 0.0, []
    for unit in data.T:
        values = unit[~np.isnan(unit)]
        m = len(values)
        if m < 2:
            continue
        pairable.append(values)
        # sum over ordered pairs i != j of (v_i - v_j)^2 = 2 (m sum v^2 - (sum v)^2)
        observed_sum += 2 * (m * np.sum(values ** 2) - np.sum(values) ** 2) / (m - 1)
    if not pairable:
        return float("nan")
    every = np.concatenate(pairable)
    n = len(every)
    expected = 2 * (n * np.sum(every ** 2) - np.sum(every) ** 2) / (n * (n - 1))
    observed = observed_sum / n
    if expected == 0:
        return float("nan")
    return float(1.0 - observed / expected)


@dataclass
class PairAgreement:
    annotator_a: str
    annotator_b: str
    n_items: int
    pearson: float
    spearman: float


@dataclass
class AgreementReport:
    """Inter-annotator agreement on one rating field of one collection."""

    collection: str
    field: str
    n_items: int  # items rated by at least two annotators
    n_annotators: int
    n_ratings: int
    alpha_interval: float
    pairs: list[PairAgreement] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"collection": self.collection, "field": self.field, "n_items": self.n_items,
                "n_annotators": self.n_annotators, "n_ratings": self.n_ratings,
                "krippendorff_alpha_interval": _none_if_nan(self.alpha_interval),
                "pairs": [{"a": p.annotator_a, "b": p.annotator_b, "n_items": p.n_items,
                           "pearson": _none_if_nan(p.pearson), "spearman": _none_if_nan(p.spearman)}
                          for p in self.pairs]}


def _none_if_nan(value: float) -> float | None:
    return None if value is None or math.isnan(value) else value


def reliability_matrix(session: Session, user: User, collection: Collection,
                       field: str = "overall") -> tuple[list[str], list[int], "numpy.ndarray"]:
    """(annotator names, caption ids, coders x units matrix with NaN gaps) of a collection."""
    import numpy as np

    require_role(user, *RESEARCH_ROLES)
    if field not in RATING_FIELDS:
        raise ValueError(f"unknown rating field {field!r}: choose one of {', '.join(RATING_FIELDS)}")
    rows = session.execute(
        select(User.name, Rating.caption_id, getattr(Rating, field))
        .join(User, User.id == Rating.annotator_id)
        .where(Rating.caption_id.in_(select(Caption.id).where(in_collection(collection))),
               getattr(Rating, field).is_not(None))
    ).all()
    names = sorted({r[0] for r in rows})
    captions = sorted({r[1] for r in rows})
    matrix = np.full((len(names), len(captions)), np.nan)
    name_index = {n: i for i, n in enumerate(names)}
    caption_index = {c: j for j, c in enumerate(captions)}
    for name, caption_id, value in rows:
        matrix[name_index[name], caption_index[caption_id]] = value
    return names, captions, matrix


def agreement(session: Session, user: User, collection: Collection, field: str = "overall",
              min_pair_items: int = 3) -> AgreementReport:
    """Krippendorff's alpha (interval) and pairwise Pearson/Spearman between annotators."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr

    names, _captions, matrix = reliability_matrix(session, user, collection, field)
    rated_twice = int(np.sum(np.sum(~np.isnan(matrix), axis=0) >= 2)) if matrix.size else 0
    pairs = []
    for (i, a), (j, b) in combinations(enumerate(names), 2):
        both = ~np.isnan(matrix[i]) & ~np.isnan(matrix[j])
        n = int(both.sum())
        if n < min_pair_items:
            continue
        x, y = matrix[i, both], matrix[j, both]
        constant = np.ptp(x) == 0 or np.ptp(y) == 0
        pearson = float("nan") if constant else float(pearsonr(x, y).statistic)
        spearman = float("nan") if constant else float(spearmanr(x, y).statistic)
        pairs.append(PairAgreement(a, b, n, pearson, spearman))
    return AgreementReport(collection=collection.name, field=field, n_items=rated_twice, n_annotators=len(names),
                           n_ratings=int(np.sum(~np.isnan(matrix))),
                           alpha_interval=krippendorff_alpha_interval(matrix) if matrix.size else float("nan"),
                           pairs=pairs)
