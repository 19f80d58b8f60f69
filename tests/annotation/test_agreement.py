"""Krippendorff's alpha (interval) checked against the `krippendorff` package; pairwise stats."""
from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr, spearmanr

from annotation.studies.agreement import agreement, krippendorff_alpha_interval
from annotation.captions import add_caption, get_or_create_collection
from annotation.image_store import add_image
from annotation.studies.tasks import submit_rating
from db.session import session_scope


def _reference_alpha(matrix: np.ndarray) -> float:
    return krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval")


@pytest.mark.parametrize("seed", range(5))
def test_alpha_matches_krippendorff_package_with_missing_values(seed):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 1, size=40)
    matrix = np.clip(truth + rng.normal(0, 0.15 * (seed + 1), size=(6, 40)), 0, 1)
    matrix[rng.uniform(size=matrix.shape) < 0.3] = np.nan
    assert krippendorff_alpha_interval(matrix) == pytest.approx(_reference_alpha(matrix), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])),
                         min_size=8, max_size=8), min_size=2, max_size=5))
def test_alpha_matches_package_on_arbitrary_reliability_data(rows):
    matrix = np.array([[np.nan if v is None else v for v in row] for row in rows])
    pairable = np.sum(~np.isnan(matrix), axis=0) >= 2
    values = matrix[:, pairable]
    values = values[~np.isnan(values)]
    if len(np.unique(values)) < 2:  # no variation: alpha is undefined (the package raises)
        assert np.isnan(krippendorff_alpha_interval(matrix))
        return
    assert krippendorff_alpha_interval(matrix) == pytest.approx(_reference_alpha(matrix), abs=1e-9)


def test_perfect_agreement_is_one_and_systematic_disagreement_is_negative():
    assert krippendorff_alpha_interval(np.array([[0.1, 0.5, 0.9], [0.1, 0.5, 0.9]])) == pytest.approx(1.0)
    assert krippendorff_alpha_interval(np.array([[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0]])) < 0


def test_collection_agreement_report(engine, accounts, make_png):
    rng = np.random.default_rng(7)
    truth = rng.uniform(0, 1, size=12)
    annotators = ["ann", "bea", "cal"]
    scores = {name: np.clip(truth + rng.normal(0, 0.1, 12), 0, 1).round(3) for name in annotators}
    with session_scope(engine) as s:
        col = get_or_create_collection(s, accounts["rita"], "agree")
        image = add_image(s, make_png(), "a.png")
        captions = [add_caption(s, accounts["rita"], image, f"caption {i}", collection=col) for i in range(12)]
        for name in annotators:
            for i, caption in enumerate(captions):
                if name == "cal" and i >= 8:
                    continue  # cal rated only the first 8
                submit_rating(s, accounts[name], caption.id, float(scores[name][i]))
        report = agreement(s, accounts["rita"], col)
    matrix = np.array([scores[n] for n in annotators])
    matrix[2, 8:] = np.nan
    assert report.alpha_interval == pytest.approx(_reference_alpha(matrix), abs=1e-9)
    assert report.alpha_interval > 0.7
    assert (report.n_items, report.n_annotators, report.n_ratings) == (12, 3, 32)
    pair = next(p for p in report.pairs if (p.annotator_a, p.annotator_b) == ("ann", "cal"))
    assert pair.n_items == 8
    assert pair.pearson == pytest.approx(pearsonr(scores["ann"][:8], scores["cal"][:8]).statistic)
    assert pair.spearman == pytest.approx(spearmanr(scores["ann"][:8], scores["cal"][:8]).statistic)
    assert len(report.pairs) == 3
    assert report.to_dict()["krippendorff_alpha_interval"] == pytest.approx(report.alpha_interval)
