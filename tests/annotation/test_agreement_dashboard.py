"""The agreement dashboard (issue 24): ICC(2,k) and Fleiss' kappa against published worked
examples, bootstrap intervals, per-annotator bias, leave-one-out tau and time per item, and
the same numbers from `caplens db agreement` and beside a ratings export."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select, update

from annotation.studies.agreement import (
    bootstrap_interval,
    category_counts,
    fleiss_kappa,
    icc_2k,
    krippendorff_alpha_interval,
    study_agreement,
)
from annotation.captions import add_caption, get_collection, get_or_create_collection
from annotation.transfer.exporters import agreement_path, export_table
from annotation.image_store import add_image
from annotation.studies.tasks import submit_rating
from db.models import Rating, User
from db.session import get_engine, session_scope

REPO = Path(__file__).resolve().parents[2]

# Shrout & Fleiss (1979), Table 2: six targets rated by four judges. The paper gives
# ICC(2,1) = .29 and ICC(2,4) = .62 (Table 4).
SHROUT_FLEISS = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]])

# The worked example of Fleiss' kappa (10 subjects, 14 raters, 5 categories; counts per
# category), as in Fleiss (1971)'s method and its common textbook illustration: kappa = 0.210.
FLEISS_EXAMPLE = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                           [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])


def test_icc_2k_equals_shrout_and_fleiss_table():
    assert icc_2k(SHROUT_FLEISS) == pytest.approx(0.62, abs=0.005)
    assert icc_2k(SHROUT_FLEISS[:, :1]) != icc_2k(SHROUT_FLEISS[:, :1])  # one rater: undefined (NaN)


def test_fleiss_kappa_equals_the_worked_example():
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(0.210, abs=0.0005)


def test_fleiss_kappa_from_ratings_counts_each_value_as_a_category():
    # coders x units; unit 3 has one rating only and is left out
    ratings = np.array([[0.5, 1.0, 0.0, np.nan], [0.5, 1.0, 0.5, 0.25], [0.5, 0.0, 0.5, np.nan]])
    counts = category_counts(ratings)
    assert counts.tolist() == [[0, 0, 3, 0], [1, 0, 0, 2], [1, 0, 2, 0], [0, 1, 0, 0]]
    # by hand, over units 0-2: P_i = (1, 1/3, 1/3), mean 5/9; category shares of their 9 ratings
    # (2/9, 0, 5/9, 2/9), expected agreement 33/81; kappa = (45/81 - 33/81) / (48/81) = 1/4
    assert fleiss_kappa(counts) == pytest.approx(0.25)


def test_bootstrap_interval_brackets_the_estimate_and_is_seeded():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, 60)
    matrix = np.clip(truth + rng.normal(0, 0.1, (3, 60)), 0, 1)
    low, high = bootstrap_interval(krippendorff_alpha_interval, matrix, samples=300, seed=4)
    assert low < krippendorff_alpha_interval(matrix) < high and high - low < 0.2
    assert bootstrap_interval(krippendorff_alpha_interval, matrix, samples=300, seed=4) == (low, high)


@pytest.fixture
def rated(engine, accounts, make_png):
    """Collection "d": 6 captions; ann and bea agree, cal rates 0.2 higher; seconds stored."""
    truth = [0.1, 0.3, 0.4, 0.5, 0.6, 0.7]
    with session_scope(engine) as s:
        rita = s.merge(accounts["rita"])
        collection = get_or_create_collection(s, rita, "d")
        for n, value in enumerate(truth):
            image = add_image(s, make_png((30 * n, 10, 10)), original_filename=f"d{n}.png")
            caption = add_caption(s, rita, image, f"caption {n}", collection=collection)
            for name, offset in (("ann", 0.0), ("bea", 0.0), ("cal", 0.2)):
                submit_rating(s, s.merge(accounts[name]), caption.id, round(value + offset, 2))
        bea = s.scalar(select(User.id).where(User.name == "bea"))
        s.execute(update(Rating).where(Rating.annotator_id == bea).values(seconds=Rating.id * 1.0))
    return truth


def test_study_agreement_per_annotator_and_study(engine, accounts, rated):
    with session_scope(engine, read_only=True) as s:
        report = study_agreement(s, s.merge(accounts["rita"]), get_collection(s, "d"), samples=200)
    by = {a.annotator: a for a in report.annotators}
    assert by["cal"].bias == pytest.approx(0.2) and by["ann"].bias == pytest.approx(-0.1)
    assert by["cal"].loo_tau == pytest.approx(1.0) and by["ann"].items_rated == 6
    assert by["bea"].median_seconds == pytest.approx(np.median(range(2, 19, 3))) and by["ann"].median_seconds is None
    table = np.array([[v, v, round(v + 0.2, 2)] for v in rated])
    assert report.icc_items == 6 and report.icc_2k == pytest.approx(icc_2k(table))
    assert report.alpha_interval == pytest.approx(krippendorff_alpha_interval(table.T))
    assert report.fleiss_kappa == pytest.approx(fleiss_kappa(category_counts(table.T)))
    assert report.icc_2k_ci[0] <= report.icc_2k <= report.icc_2k_ci[1]


def _study(engine, accounts, make_png, name, plan):
    """Collection `name` rated as `plan` says: {caption number: {annotator: value}}."""
    with session_scope(engine) as s:
        rita = s.merge(accounts["rita"])
        collection = get_or_create_collection(s, rita, name)
        for n, values in plan.items():
            image = add_image(s, make_png((40 * n, 20, 10)), original_filename=f"{name}{n}.png")
            caption = add_caption(s, rita, image, f"caption {n}", collection=collection)
            for who, value in values.items():
                submit_rating(s, s.merge(accounts[who]), caption.id, value)
    with session_scope(engine, read_only=True) as s:
        return study_agreement(s, s.merge(accounts["rita"]), get_collection(s, name), samples=50)


def test_an_undefined_coefficient_says_what_the_study_lacks(engine, accounts, make_png):
    # ann rates every item, bea the first three, cal the last three: no item has all three
    plan = {n: {"ann": 0.1 * n, ("bea" if n < 3 else "cal"): 0.1 * n + 0.05} for n in range(6)}
    report = _study(engine, accounts, make_png, "gaps", plan)
    rows = {row[0].split(" over")[0]: row[1:] for row in report.summary_rows()}
    assert report.icc_items == 0 and rows["ICC(2,k)"] == [
        None, "undefined: needs two items rated by all 3 annotators; none is"]
    assert rows["Krippendorff's alpha (interval)"][0] is not None  # six items rated twice
    same = _study(engine, accounts, make_png, "same", {n: {"ann": 0.5, "bea": 0.5} for n in range(4)})
    why = "undefined: every rating has the same value, so agreement cannot be told from chance"
    assert [row[1:] for row in same.summary_rows()] == [[None, why]] * 3
    alone = _study(engine, accounts, make_png, "alone", {n: {"ann": 0.2 * n} for n in range(3)})
    assert {row[2] for row in alone.summary_rows()} == {"undefined: no item has ratings by two annotators yet"}


def test_annotators_may_not_read_the_dashboard(engine, accounts, rated):
    with session_scope(engine, read_only=True) as s, pytest.raises(PermissionError):
        study_agreement(s, s.merge(accounts["ann"]), get_collection(s, "d"))


@pytest.mark.parametrize("empty_db_url", ["sqlite"], indirect=True)
def test_cli_and_exports_give_the_dashboards_numbers(db_url, accounts, rated, tmp_path):
    with session_scope(get_engine(db_url), read_only=True) as s:
        rita = s.merge(accounts["rita"])
        expected = study_agreement(s, rita, get_collection(s, "d")).to_dict()
        for fmt, name in (("csv", "r.csv"), ("hf", "r-hf")):
            summary = export_table(s, rita, "ratings", tmp_path / name, fmt, get_collection(s, "d"))
            assert summary["agreement"]["d"] == expected
            assert json.loads(agreement_path(tmp_path / name, fmt).read_text())["d"] == expected
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "db", "agreement", "--collection", "d", "--user", "rita"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=180)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dashboard"] == expected
