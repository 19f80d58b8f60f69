"""Inter-annotator agreement: Krippendorff's alpha (interval) and pairwise correlations, and the
agreement dashboard (`study_agreement`): ICC(2,k) and Fleiss' kappa beside alpha, each with a
bootstrap interval over items, and per annotator the items rated, median seconds per item,
bias against the others and leave-one-out tau."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from annotation.people.accounts import RESEARCH_ROLES, require_role
from annotation.captions import in_collection
from annotation.studies.quality import check_accuracy
from annotation.studies.tasks import RATING_FIELDS
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
    present = ~np.isnan(data)
    m = present.sum(axis=0)
    pairable = m >= 2
    if not pairable.any():
        return float("nan")
    values = np.where(present, data, 0.0)[:, pairable]
    m, sums, squares = m[pairable], values.sum(axis=0), (values ** 2).sum(axis=0)
    # per unit, the sum over ordered pairs i != j of (v_i - v_j)^2 = 2 (m sum v^2 - (sum v)^2)
    observed_sum = float(np.sum(2 * (m * squares - sums ** 2) / (m - 1)))
    n = int(m.sum())
    expected = 2 * (n * squares.sum() - sums.sum() ** 2) / (n * (n - 1))
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


# ---------------------------------------------------------------------------------------
# the agreement dashboard: whole-study coefficients with bootstrap intervals, per annotator

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95


def icc_2k(table) -> float:
    """ICC(2,k) of Shrout & Fleiss (1979): two-way random effects, absolute agreement, the
    mean of the k raters. `table` is items x raters with no gaps. NaN when undefined."""
    import numpy as np

    data = np.asarray(table, dtype=float)
    n, k = data.shape
    if n < 2 or k < 2 or np.isnan(data).any():
        return float("nan")
    grand = data.mean()
    ss_rows = k * np.sum((data.mean(axis=1) - grand) ** 2)
    ss_cols = n * np.sum((data.mean(axis=0) - grand) ** 2)
    ss_error = np.sum((data - grand) ** 2) - ss_rows - ss_cols
    ms_rows, ms_cols = ss_rows / (n - 1), ss_cols / (k - 1)
    ms_error = ss_error / ((n - 1) * (k - 1))
    denominator = ms_rows + (ms_cols - ms_error) / n
    return float("nan") if denominator == 0 else float((ms_rows - ms_error) / denominator)


def fleiss_kappa(counts) -> float:
    """Fleiss' kappa (1971) from an items x categories table of how many raters chose each
    category. Items may have different numbers of raters (each item's agreement is taken over
    its own pairs); items with fewer than two are left out. NaN when undefined."""
    import numpy as np

    data = np.asarray(counts, dtype=float)
    raters = data.sum(axis=1)
    data, raters = data[raters >= 2], raters[raters >= 2]
    if len(data) == 0:
        return float("nan")
    agreement_per_item = (np.sum(data ** 2, axis=1) - raters) / (raters * (raters - 1))
    shares = data.sum(axis=0) / data.sum()
    expected = float(np.sum(shares ** 2))
    if expected == 1:
        return float("nan")
    return float((agreement_per_item.mean() - expected) / (1 - expected))


def category_counts(matrix) -> "numpy.ndarray":
    """Coders x units values -> units x categories counts (each distinct value, to 2 decimals,
    is a category: the Rate view's 0.05 steps, or the codes of a categorical answer)."""
    import numpy as np

    data = np.round(np.asarray(matrix, dtype=float), 2)
    categories = np.unique(data[~np.isnan(data)])
    return np.stack([np.sum(data == c, axis=0) for c in categories], axis=1) if len(categories) else \
        np.zeros((data.shape[1], 0))


def complete_block(matrix) -> "numpy.ndarray":
    """Items x raters of the units every coder of `matrix` (coders x units) rated: what
    ICC(2,k) needs (with k-balanced queues, give it the study's annotators who share items)."""
    import numpy as np

    data = np.asarray(matrix, dtype=float)
    return data[:, ~np.isnan(data).any(axis=0)].T


def bootstrap_interval(statistic, matrix, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0,
                       level: float = BOOTSTRAP_LEVEL) -> tuple[float, float] | None:
    """Percentile interval of `statistic(coders x units)` over resamples of the units (items)
    with replacement; None when fewer than two resamples give a number."""
    import numpy as np

    data = np.asarray(matrix, dtype=float)
    if data.ndim != 2 or data.shape[1] < 2 or samples < 1:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(samples):
        value = statistic(data[:, rng.integers(0, data.shape[1], data.shape[1])])
        if not math.isnan(value):
            values.append(value)
    if len(values) < 2:
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


@dataclass
class AnnotatorStats:
    """One annotator in the dashboard: how much, how fast, how biased, how consistent."""

    annotator: str
    items_rated: int
    median_seconds: float | None  # from the queue's offer to the save (Rating.seconds)
    bias: float | None  # mean of (their value - the others' mean) on items others rated too
    loo_tau: float | None  # Kendall's tau of their values with the others' mean, same items
    gold_accuracy: float | None  # share of gold items answered within tolerance (None: no gold items)

    def to_dict(self) -> dict:
        return {"annotator": self.annotator, "items_rated": self.items_rated,
                "median_seconds": self.median_seconds, "bias": _none_if_nan(self.bias),
                "loo_tau": _none_if_nan(self.loo_tau), "gold_accuracy": self.gold_accuracy}


@dataclass
class StudyAgreement:
    """The agreement dashboard of one rating field of one collection: the same numbers for
    the app, `caplens db agreement` and the exports' agreement.json."""

    collection: str
    field: str
    n_items: int  # items rated by at least two annotators
    n_annotators: int
    n_ratings: int
    alpha_interval: float
    alpha_ci: tuple[float, float] | None
    icc_2k: float
    icc_2k_ci: tuple[float, float] | None
    icc_items: int  # items every annotator rated (ICC's complete table)
    fleiss_kappa: float
    fleiss_kappa_ci: tuple[float, float] | None
    annotators: list[AnnotatorStats]
    bootstrap_samples: int
    distinct_values: int = 0  # distinct rating values (to 2 decimals): one leaves every coefficient undefined

    def to_dict(self) -> dict:
        def ci(value):
            return None if value is None else [value[0], value[1]]

        return {"collection": self.collection, "field": self.field, "n_items": self.n_items,
                "n_annotators": self.n_annotators, "n_ratings": self.n_ratings,
                "krippendorff_alpha_interval": _none_if_nan(self.alpha_interval),
                "krippendorff_alpha_ci95": ci(self.alpha_ci),
                "icc_2k": _none_if_nan(self.icc_2k), "icc_2k_ci95": ci(self.icc_2k_ci),
                "icc_items": self.icc_items,
                "fleiss_kappa": _none_if_nan(self.fleiss_kappa), "fleiss_kappa_ci95": ci(self.fleiss_kappa_ci),
                "bootstrap_samples": self.bootstrap_samples,
                "annotators": [a.to_dict() for a in self.annotators]}

    def why_undefined(self, measure: str) -> str:
        """Why `measure` ("alpha", "icc" or "kappa") has no value: what the study still lacks."""
        if self.n_items == 0:
            return "no item has ratings by two annotators yet"
        if measure == "icc" and self.icc_items < 2:
            rated = "none is" if self.icc_items == 0 else "one is"
            return f"needs two items rated by all {self.n_annotators} annotators; {rated}"
        if self.distinct_values < 2:
            return "every rating has the same value, so agreement cannot be told from chance"
        return "the items rated by all do not vary" if measure == "icc" else "the items rated twice do not vary"

    def summary_rows(self) -> list[list]:
        """[measure, value, 95% interval] rows, as the dashboard shows them; where a coefficient is
        undefined, the interval's cell says why."""
        def shown(measure, value, interval):
            value = _none_if_nan(value)
            if value is None:
                return [None, f"undefined: {self.why_undefined(measure)}"]
            return [round(value, 4), "" if interval is None else f"{interval[0]:.3f} to {interval[1]:.3f}"]

        return [["Krippendorff's alpha (interval)", *shown("alpha", self.alpha_interval, self.alpha_ci)],
                [f"ICC(2,k) over {self.icc_items} items rated by all",
                 *shown("icc", self.icc_2k, self.icc_2k_ci)],
                ["Fleiss' kappa (each value a category)", *shown("kappa", self.fleiss_kappa, self.fleiss_kappa_ci)]]

    def annotator_rows(self) -> list[list]:
        def rounded(value, digits=3):
            value = _none_if_nan(value)
            return None if value is None else round(value, digits)

        return [[a.annotator, a.items_rated, rounded(a.median_seconds, 1), rounded(a.bias), rounded(a.loo_tau),
                 rounded(a.gold_accuracy)] for a in self.annotators]


ANNOTATOR_HEADERS = ["annotator", "items rated", "median s per item", "bias (vs others)", "leave-one-out tau",
                     "gold accuracy"]


def _annotator_stats(names, matrix, seconds: dict[str, list[float]]) -> list[AnnotatorStats]:
    import numpy as np
    from scipy.stats import kendalltau

    stats = []
    for i, name in enumerate(names):
        mine = ~np.isnan(matrix[i])
        others = np.delete(matrix, i, axis=0)
        shared = mine & (np.sum(~np.isnan(others), axis=0) >= 1) if len(others) else np.zeros_like(mine)
        bias = tau = None
        if shared.any():
            others_mean = np.nanmean(others[:, shared], axis=0)
            bias = float(np.mean(matrix[i, shared] - others_mean))
            if shared.sum() >= 3 and np.ptp(matrix[i, shared]) > 0 and np.ptp(others_mean) > 0:
                tau = float(kendalltau(matrix[i, shared], others_mean).statistic)
        times = seconds.get(name, [])
        stats.append(AnnotatorStats(name, int(mine.sum()), float(np.median(times)) if times else None, bias, tau,
                                    None))
    return stats


def _add_gold_accuracy(stats: list[AnnotatorStats], accuracy: dict[str, tuple[int, int]]) -> None:
    """Each annotator's share of gold items and attention checks answered within tolerance
    (`quality.check_accuracy`); one who answered checks but rated nothing gets a row too."""
    known = {a.annotator: a for a in stats}
    for name, (correct, answered) in sorted(accuracy.items()):
        if name not in known:
            known[name] = AnnotatorStats(name, 0, None, None, None, None)
            stats.append(known[name])
        known[name].gold_accuracy = correct / answered if answered else None


def study_agreement(session: Session, user: User, collection: Collection, field: str = "overall",
                    samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> StudyAgreement:
    """The agreement dashboard (researcher or admin): Krippendorff's alpha, ICC(2,k) on the
    items every annotator rated, and Fleiss' kappa with each distinct value as a category, each
    with a `samples`-resample bootstrap interval over items (seeded: the same numbers every
    time), and per annotator: items rated, median seconds per item, bias, leave-one-out tau and
    gold accuracy (gold items and attention checks within tolerance, `annotation.studies.quality`)."""
    import numpy as np

    names, _captions, matrix = reliability_matrix(session, user, collection, field)
    seconds: dict[str, list[float]] = {}
    for name, spent in session.execute(
            select(User.name, Rating.seconds).join(User, User.id == Rating.annotator_id)
            .where(Rating.caption_id.in_(select(Caption.id).where(in_collection(collection))),
                   Rating.seconds.is_not(None))):
        seconds.setdefault(name, []).append(spent)
    has_data = matrix.size > 0
    block = complete_block(matrix) if has_data else np.zeros((0, 0))

    def alpha(m):
        return krippendorff_alpha_interval(m)

    def icc(m):
        return icc_2k(complete_block(m))

    def kappa(m):
        return fleiss_kappa(category_counts(m))

    def interval(fn):
        return bootstrap_interval(fn, matrix, samples, seed) if has_data else None

    stats = _annotator_stats(names, matrix, seconds) if has_data else []
    _add_gold_accuracy(stats, check_accuracy(session, collection))
    return StudyAgreement(
        collection=collection.name, field=field,
        n_items=int(np.sum(np.sum(~np.isnan(matrix), axis=0) >= 2)) if has_data else 0,
        n_annotators=len(names), n_ratings=int(np.sum(~np.isnan(matrix))),
        alpha_interval=alpha(matrix) if has_data else float("nan"), alpha_ci=interval(alpha),
        icc_2k=icc_2k(block) if block.size else float("nan"), icc_2k_ci=interval(icc) if block.size else None,
        icc_items=int(block.shape[0]) if block.size else 0,
        fleiss_kappa=kappa(matrix) if has_data else float("nan"), fleiss_kappa_ci=interval(kappa),
        annotators=stats, bootstrap_samples=samples,
        distinct_values=int(category_counts(matrix).shape[1]) if has_data else 0)


def dashboard(account_id: int | None, collection_name: str, field: str = "overall") -> StudyAgreement:
    """`study_agreement` of a collection, as the acting account (researcher or admin)."""
    from annotation.people.acting import acting, chosen_collection
    from annotation.captions import get_collection

    chosen_collection(account_id, collection_name)
    with acting(account_id, read_only=True) as (session, user):
        return study_agreement(session, user, get_collection(session, collection_name), field)
