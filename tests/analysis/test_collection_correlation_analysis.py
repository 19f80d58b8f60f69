"""One correlation of a collection for the Analyze tab and `caplens analyze correlation
--collection`: the same rows (rated candidate captions, mean overall rating or each rating),
the same scores, the same n and τc; progress with counts, and cached scores reused."""
from __future__ import annotations

import io

import pandas as pd
import pytest
from PIL import Image

from annotation.people.accounts import create_user
from annotation.captions import add_caption, get_or_create_collection
from annotation.scores.collection_analysis import CORRELATING, analyse_collection
from annotation.database import database_session, open_database
from annotation.image_store import add_image
from annotation.perturbations import store_perturbation
from annotation.studies.tasks import submit_rating
from app.cli import main
from db.session import dispose_engines
from scoring.analysis.report import CorrelationFilters
from scoring.api import Scorer
from scoring.perturb.ops import perturb
from tests.analysis.test_collection_scores_analysis import CountingScorer

METRICS = ["BLEU-1", "ROUGE-L"]
# (language, reference, [(candidate, [overall rating by rater 1, 2, 3; None: not rated])])
CAPTIONS = [
    ("en", "a brown dog runs across the green grass", [
        ("a brown dog runs on grass", [0.9, 0.8, 0.7]),
        ("a dog on the grass", [0.6, 0.7, None]),
        ("a cat sits on a sofa", [0.1, 0.2, 0.0]),
        ("grass", [0.3, None, None]),
        ("a dog", [None, None, None])]),
    ("de", "ein brauner Hund rennt über das grüne Gras", [
        ("ein Hund rennt über das Gras", [0.8, 0.9, None]),
        ("eine Katze schläft", [0.2, 0.1, 0.3]),
        ("ein brauner Hund", [0.5, None, None])]),
]


def _png(colour) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def collection(tmp_path, monkeypatch):
    """A collection with rated and unrated candidates in two languages, a rated perturbed
    caption and a reference: only the rated candidates may be correlated."""
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CAPLENS_DATABASE_URL", f"sqlite:///{tmp_path / 'caplens.db'}")
    open_database()
    with database_session() as session:
        researcher = create_user(session, "res", "researcher", "researcher-password")
        raters = [create_user(session, f"rater{i}", "annotator", f"rater-password-{i}") for i in range(3)]
        stored = get_or_create_collection(session, researcher, "c")
        for index, (lang, reference, candidates) in enumerate(CAPTIONS):
            image = add_image(session, _png((40 * index, 90, 200)), original_filename=f"{lang}.png")
            add_caption(session, researcher, image, reference, language=lang, kind="reference", collection=stored)
            for text, ratings in candidates:
                caption = add_caption(session, researcher, image, text, language=lang, collection=stored)
                for rater, score in zip(raters, ratings):
                    if score is not None:
                        submit_rating(session, rater, caption.id, score)
            if lang == "en":
                changed = store_perturbation(session, researcher, caption, perturb("a brown dog runs on grass",
                                                                                   "repetition", seed=0),
                                             collection=stored)
                submit_rating(session, raters[0], changed.id, 0.4)  # a rated perturbation: never correlated
        researcher_id = researcher.id
    yield researcher_id
    dispose_engines()


def app_path(researcher_id, scorer, per_rating=False, progress=None):
    """What the Analyze tab's button calls."""
    filters = CorrelationFilters(per_rating=per_rating, n_boot=0)
    return analyse_collection(researcher_id, "c", scorer, METRICS, filters, progress=progress)


def cli_path(tmp_path, capsys, *extra) -> tuple[pd.DataFrame, str]:
    out = tmp_path / "cli.csv"
    code = main(["analyze", "correlation", "--collection", "c", "--profile", "tiny", "--user", "res",
                 "--bootstrap", "0", "--out", str(out), *extra])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return pd.read_csv(out), printed.out


def _n_and_tau(table: pd.DataFrame) -> dict:
    return {(row.lang, row.metric): (int(row.n), round(float(row.kendall_c), 12)) for row in table.itertuples()}


@pytest.mark.parametrize("per_rating", [False, True])
def test_app_and_cli_correlate_the_same_rows(collection, tmp_path, capsys, per_rating):
    report = app_path(collection, Scorer("tiny"), per_rating)
    cli, printed = cli_path(tmp_path, capsys, "--metrics", *METRICS, *(["--per-rating"] if per_rating else []))
    assert _n_and_tau(cli) == _n_and_tau(report.correlations)
    expected_n = {"en": 9, "de": 6} if per_rating else {"en": 4, "de": 3}  # ratings / rated candidates
    assert {lang: n for (lang, _), (n, _) in _n_and_tau(cli).items()} == expected_n
    assert report.filters.describe() in printed
    assert ("each overall rating is one row" in printed) == per_rating


@pytest.mark.parametrize("per_rating", [False, True])
def test_the_scatter_counts_the_rows_the_table_correlates(collection, per_rating):
    """The Analyze tab's scatter took every caption with a rating, the rated perturbation
    included, so its title said n=8 beside a table of 4 + 3 (a user saw 793 against 791)."""
    from scoring.analysis.correlation import kendall_tau

    report = app_path(collection, Scorer("tiny"), per_rating)
    n = int(report.correlations.drop_duplicates("lang")["n"].sum())
    assert n == (15 if per_rating else 7)
    figure = report.scatter("BLEU-1")
    tau = kendall_tau(report.rows["BLEU-1"], report.rows["human"], "c")
    languages = report.rows["lang"].nunique()
    assert languages > 1  # pooled: the title says so
    assert f"<sup>n={n}, Kendall τc={tau:.3f} over all {languages} languages</sup>" in figure.layout.title.text
    points = sum(len(trace.x) for trace in figure.data)
    assert points == n


def test_mean_rating_per_caption_is_the_human_score(collection):
    rows = app_path(collection, Scorer("tiny")).rows.set_index("candidate")
    assert rows.loc["a dog on the grass", "human"] == pytest.approx(0.65)
    assert "a dog" not in rows.index  # unrated
    assert set(rows["kind"]) == {"candidate"}  # no reference, no rated perturbation


def test_cli_without_metrics_uses_the_cached_ones(collection, tmp_path, capsys):
    app_path(collection, Scorer("tiny"))
    cli, _ = cli_path(tmp_path, capsys)
    assert set(cli["metric"]) == set(METRICS)


def test_cli_without_metrics_or_cache_says_what_to_do(collection, tmp_path, capsys):
    code = main(["analyze", "correlation", "--collection", "c", "--profile", "tiny", "--user", "res"])
    assert code == 2 and "give --metrics" in capsys.readouterr().err


def test_progress_counts_and_a_second_run_scores_nothing(collection):
    seen: list[tuple[float, str]] = []

    def progress(fraction, desc=""):
        seen.append((fraction, desc))

    first = CountingScorer(Scorer("tiny"))
    app_path(collection, first, progress=progress)
    scored = 9  # 8 candidates and the perturbed caption; references are not scored
    assert first.scored == {name: scored for name in METRICS}
    assert seen[0] == (0.0, f"scored 0/{scored} captions (0 had cached scores); scoring the next {scored}")
    assert seen[-2:] == [(1.0, f"scored {scored}/{scored} captions (0 had cached scores)"), (1.0, CORRELATING)]
    seen.clear()
    again = CountingScorer(Scorer("tiny"))  # a fresh process: only the database remembers
    report = app_path(collection, again, progress=progress)
    assert again.scored == {}
    assert seen == [(1.0, f"all {scored} captions had cached scores: nothing to score"), (1.0, CORRELATING)]
    assert (report.correlations["n"] > 0).all()


def test_by_default_cli_and_tab_agree_on_the_intervals_too(collection, tmp_path, capsys):
    tab = analyse_collection(collection, "c", Scorer("tiny"), METRICS).correlations  # the tab's defaults
    out = tmp_path / "default.csv"
    assert main(["analyze", "correlation", "--collection", "c", "--profile", "tiny", "--user", "res",
                 "--metrics", *METRICS, "--out", str(out)]) == 0
    assert "95 % intervals from 200 bootstrap resamples" in capsys.readouterr().out
    cli = pd.read_csv(out)
    columns = ["n", "kendall_c", "kendall_c_low", "kendall_c_high", "spearman_low", "pearson_high"]
    pd.testing.assert_frame_equal(cli.set_index(["lang", "metric"])[columns].astype(float),
                                  tab.set_index(["lang", "metric"])[columns].astype(float), rtol=1e-9)


@pytest.mark.java
def test_cider_of_a_caption_does_not_depend_on_its_scoring_batch(collection, monkeypatch):
    """CIDEr-D's document frequencies come from every image of the collection, not from the
    batch of captions scored together: batches of 2 (each holding one image's captions, where
    frequencies from one image make every value 0) give the values of one batch of all."""
    from sqlalchemy import delete

    from annotation.scores import score_store
    from db.models import MetricScore

    filters = CorrelationFilters(n_boot=0)

    def cider() -> dict:
        rows = analyse_collection(collection, "c", Scorer("tiny"), ["CIDEr"], filters).rows
        return dict(zip(rows["candidate"], rows["CIDEr"]))

    monkeypatch.setattr(score_store, "SCORE_BATCH", 2)
    small = cider()
    with database_session() as session:
        session.execute(delete(MetricScore))
    monkeypatch.setattr(score_store, "SCORE_BATCH", 128)
    whole = cider()
    assert small == pytest.approx(whole)
    assert whole["a brown dog runs on grass"] > 1.0  # shares "brown dog runs" with its image's reference
