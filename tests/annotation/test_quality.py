"""Study quality control (issue 24, annotation.studies.quality): the qualification round with feedback
and its pass mark, gold items and attention checks at the study's rate, flagging and pausing,
blind overlap, the review queue and adjudicated values beside the raw ratings, gold accuracy
in the dashboard, `caplens db agreement` and the exports, and the role checks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from annotation.studies import queue_screens

from annotation.studies import quality
from annotation.studies.agreement import study_agreement
from annotation.captions import add_caption, get_collection, get_or_create_collection
from annotation.transfer.exporters import captions_table, export_table, ratings_table
from annotation.image_store import add_image
from annotation.studies.tasks import rating_progress, submit_rating
from db.models import Adjudication, CheckAnswer, Rating, StudyParticipant, User
from db.session import get_engine, session_scope

REPO = Path(__file__).resolve().parents[2]


def _id(engine, name):
    with session_scope(engine, read_only=True) as s:
        return s.scalar(select(User.id).where(User.name == name))


@pytest.fixture
def study(engine, accounts, make_png):
    """Collection "q": captions q0, q1 (qualification: expected 0.8 and 0.2, tolerance 0.1),
    g0 (gold, expected 0.9 +- 0.1), a0 (attention: answer 0), and six ordinary captions r0-r5."""
    ids = {}
    with session_scope(engine) as s:
        rita = s.merge(accounts["rita"])
        collection = get_or_create_collection(s, rita, "q")
        for n, name in enumerate(["q0", "q1", "g0", "a0", *[f"r{i}" for i in range(6)]]):
            image = add_image(s, make_png((n * 20, 9, 9)))
            ids[name] = add_caption(s, rita, image, f"caption {name}", collection=collection).id
        quality.add_check_item(s, rita, collection, ids["q0"], "qualification", 0.8, 0.1,
                               explanation="The dog is there but the ball is not.")
        quality.add_check_item(s, rita, collection, ids["q1"], "qualification", 0.2, 0.1)
        quality.add_check_item(s, rita, collection, ids["g0"], "gold", 0.9, 0.1)
        quality.add_check_item(s, rita, collection, ids["a0"], "attention", 0.0, 0.05,
                               instruction="Set the overall score to 0.")
    return ids


def _settings(engine, accounts, **values):
    with session_scope(engine) as s:
        quality.set_quality(s, s.merge(accounts["rita"]), get_collection(s, "q"), **values)


def test_qualification_round_feedback_pass_and_fail(engine, accounts, study):
    _settings(engine, accounts, qualification_pass=0.5)
    ann, bea = _id(engine, "ann"), _id(engine, "bea")
    first = queue_screens.rating_screen(ann, "q")
    assert first.caption_id == study["q0"] and "Qualification round" in first.notice and "item 1 of 2" in first.notice
    assert "0.8" not in first.notice  # the expected answer only after answering
    with pytest.raises(PermissionError, match="qualification round"):  # the API cannot go around the round
        queue_screens.rate(ann, study["r0"], 0.5)
    with pytest.raises(ValueError, match="cannot be skipped"):
        queue_screens.skip_rating(ann, "q", study["q0"])
    # 0.7 is at the tolerance's edge of 0.8 +- 0.1 (in floats |0.7 - 0.8| > 0.1): within it
    second = queue_screens.rate_and_next(ann, "q", study["q0"], 0.7)
    assert "expected 0.80 (± 0.10), you gave 0.70: within the tolerance" in second.notice
    assert "ball is not" in second.notice and second.caption_id == study["q1"] and "item 2 of 2" in second.notice
    # 1 of 2 = 50 % passes a 0.5 mark
    real = queue_screens.rate_and_next(ann, "q", study["q1"], 0.45)
    assert "expected 0.20 (± 0.10), you gave 0.45: outside the tolerance" in real.notice
    assert "You passed" in real.notice
    assert real.caption_id not in (study["q0"], study["q1"], study["g0"], study["a0"])
    queue_screens.rate_and_next(ann, "q", real.caption_id, 0.6)
    queue_screens.rate_and_next(bea, "q", study["q0"], 0.8)  # within
    failed = queue_screens.rate_and_next(bea, "q", study["q1"], 0.45)  # outside: 1 of 2 ...
    assert "within the tolerance" in failed.notice and failed.caption_id is not None
    _settings(engine, accounts, qualification_pass=0.75)  # ... so cal, with a 0.75 mark, fails
    cal = _id(engine, "cal")
    queue_screens.rate_and_next(cal, "q", study["q0"], 0.8)
    failed = queue_screens.rate_and_next(cal, "q", study["q1"], 0.45)
    assert failed.caption_id is None and "did not pass" in failed.notice and "50%" in failed.notice
    assert "75%" in failed.notice
    assert queue_screens.rating_screen(cal, "q").caption_id is None  # a reload keeps the fail
    with pytest.raises(PermissionError, match="did not pass"):
        queue_screens.rate(cal, study["r1"], 0.5)
    with session_scope(engine) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        rows = {p.annotator: p for p in quality.participants(s, rita, col)}
        assert (rows["ann"].qualification, rows["ann"].qualification_score) == ("passed", 0.5)
        assert (rows["cal"].qualification, rows["cal"].qualification_score) == ("failed", 0.5)
        # answers stay out of the ratings: only ann's one real rating is there
        assert s.scalar(select(func.count(Rating.id))) == 1
        assert s.scalar(select(func.count(CheckAnswer.id)).where(CheckAnswer.phase == "qualification")) == 6
        assert quality.allow_new_attempt(s, rita, col, "cal") == 2
    again = queue_screens.rating_screen(cal, "q")
    assert again.caption_id == study["q0"] and "item 1 of 2" in again.notice


def _serve_and_answer(user_id, ids, gold_value=0.5, attention_value=0.5, real_value=0.5, limit=20):
    """Work through the queue; the kinds served, in order ("r", "g", "a")."""
    kinds = {ids["g0"]: "g", ids["a0"]: "a"}
    served = []
    screen = queue_screens.rating_screen(user_id, "q")
    while screen.caption_id is not None and len(served) < limit:
        kind = kinds.get(screen.caption_id, "r")
        served.append(kind)
        value = {"g": gold_value, "a": attention_value}.get(kind, real_value)
        screen = queue_screens.rate_and_next(user_id, "q", screen.caption_id, value)
    return served, screen


def test_checks_come_at_the_studys_rate_and_count_for_gold_accuracy(engine, accounts, study):
    _settings(engine, accounts, check_rate=1 / 3)
    served, screen = _serve_and_answer(_id(engine, "ann"), study, gold_value=0.85, attention_value=0.0)
    # one check in three items: the 3rd and the 6th; the six real items and nothing more
    assert served in (["r", "r", "g", "r", "r", "a", "r", "r"], ["r", "r", "a", "r", "r", "g", "r", "r"])
    assert screen.caption_id is None and "Nothing left" in screen.text
    with session_scope(engine, read_only=True) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        assert rating_progress(s, s.merge(accounts["ann"]), col).items == 6  # check items are not queue items
        assert quality.check_accuracy(s, col) == {"ann": (2, 2)}
        dashboard = {a.annotator: a for a in study_agreement(s, rita, col, samples=10).annotators}
        assert dashboard["ann"].gold_accuracy == 1.0 and dashboard["ann"].items_rated == 6


def test_the_attention_check_shows_its_instruction_and_gold_items_look_like_any_item(engine, accounts, study):
    _settings(engine, accounts, check_rate=1.0)
    ann = _id(engine, "ann")
    screens = []
    screen = queue_screens.rating_screen(ann, "q")
    for _ in range(2):
        screens.append(screen)
        screen = queue_screens.rate_and_next(ann, "q", screen.caption_id, 0.0)
    by_id = {s.caption_id: s for s in screens}
    assert set(by_id) == {study["g0"], study["a0"]}
    assert "Set the overall score to 0." in by_id[study["a0"]].notice
    assert by_id[study["g0"]].notice == ""  # a gold item says nothing that tells it apart
    assert screen.caption_id not in by_id  # then the real items


def test_an_annotator_below_the_threshold_is_flagged_and_paused_until_resumed(engine, accounts, study):
    _settings(engine, accounts, check_rate=0.5, accuracy_threshold=0.5, min_checks=2, pause_flagged=True)
    ann = _id(engine, "ann")
    served, screen = _serve_and_answer(ann, study, gold_value=0.5, attention_value=0.5)
    assert served == ["r", served[1], "r", served[3]] and {served[1], served[3]} == {"g", "a"}
    assert screen.caption_id is None and "You are paused in q" in screen.notice
    assert "0 of your 2 answers" in screen.notice and "below the study's 50%" in screen.notice
    with pytest.raises(PermissionError, match="paused"):
        queue_screens.rate(ann, study["r5"], 0.5)
    with session_scope(engine) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        row = quality.participants(s, rita, col)[0]
        assert (row.annotator, row.checks_answered, row.gold_accuracy, row.flagged, row.paused) == \
            ("ann", 2, 0.0, True, True)
        quality.resume(s, rita, col, "ann")
    assert queue_screens.rating_screen(ann, "q").caption_id is not None
    with session_scope(engine, read_only=True) as s:
        participant = s.get(StudyParticipant, (get_collection(s, "q").id, ann))
        assert participant.flagged_at is not None and participant.paused_at is None


def test_the_library_rating_call_keeps_the_studys_quality_control(engine, accounts, study):
    """`tasks.submit_rating`, the documented library call, refuses what the queue refuses: a
    rating before the qualification round is passed, and a check item stored as a rating."""
    _settings(engine, accounts, qualification_pass=0.5)
    with session_scope(engine) as s:
        ann = s.merge(accounts["ann"])
        with pytest.raises(PermissionError, match="qualification round"):
            submit_rating(s, ann, study["r0"], 0.5)
        with pytest.raises(ValueError, match="check item"):
            submit_rating(s, ann, study["g0"], 0.8)
    with session_scope(engine, read_only=True) as s:
        assert s.scalar(select(func.count(Rating.id))) == 0


def test_a_rating_value_must_be_a_number_not_a_boolean_or_a_huge_integer():
    from annotation.studies.tasks import validate_rating_values

    with pytest.raises(ValueError, match="overall must be a number"):
        validate_rating_values({"overall": True})
    with pytest.raises(ValueError, match="overall must be a number"):
        validate_rating_values({"overall": 10 ** 400})
    assert validate_rating_values({"overall": 1, "fluency": 0.25}) == {"overall": 1.0, "fluency": 0.25}


def test_flagged_without_pause_below_the_threshold_only(engine, accounts, study):
    _settings(engine, accounts, check_rate=0.5, accuracy_threshold=0.5, min_checks=2, pause_flagged=False)
    ann, bea = _id(engine, "ann"), _id(engine, "bea")
    _serve_and_answer(ann, study, gold_value=0.9, attention_value=0.5)  # 1 of 2 = 50 %: not below
    _serve_and_answer(bea, study, gold_value=0.75, attention_value=0.0)  # 0.75 is outside 0.9 +- 0.1: 1 of 2
    cal = _id(engine, "cal")
    served, screen = _serve_and_answer(cal, study, gold_value=0.2, attention_value=0.3)
    assert len(served) == 8 and screen.caption_id is None and screen.notice == ""  # flagged, not paused
    with session_scope(engine, read_only=True) as s:
        rows = {p.annotator: p for p in quality.participants(s, s.merge(accounts["rita"]), get_collection(s, "q"))}
        assert {n: (r.gold_accuracy, r.flagged, r.paused) for n, r in rows.items()} == {
            "ann": (0.5, False, False), "bea": (0.5, False, False), "cal": (0.0, True, False)}


def test_blind_overlap_no_screen_shows_another_annotators_rating(engine, accounts, study):
    bea, ann = _id(engine, "bea"), _id(engine, "ann")
    with session_scope(engine) as s:
        for name, value in (("bea", 0.37), ("cal", 0.63)):
            submit_rating(s, s.merge(accounts[name]), study["r0"], value)
    screens = []
    screen = queue_screens.rating_screen(ann, "q")
    while screen.caption_id is not None:
        screens.append(screen)
        screen = queue_screens.skip_rating(ann, "q", screen.caption_id)
    shown = [s for s in screens if s.caption_id == study["r0"]]
    assert len(shown) == 1 and shown[0].values == {}
    text = json.dumps([vars(s) for s in screens], default=str)
    assert "0.37" not in text and "0.63" not in text and "0.5" not in text  # nor their mean
    back = queue_screens.earlier_rating_screen(ann, "q", None)  # Back shows one's own work only
    assert back.values == {} and "0.37" not in json.dumps(vars(back), default=str)
    # a reviewer who is an annotator only sees items whose k ratings are complete, which the
    # rating queue offers nobody any more
    with session_scope(engine) as s:
        quality.add_reviewer(s, s.merge(accounts["rita"]), get_collection(s, "q"), "ann")
    assert quality.review_screen(ann, "q").caption_id is None
    # the transcreation screen shows the mean score: only of captions one cannot be asked to rate
    assert queue_screens.transcreation_screen(ann, "q", "de").caption_id is None
    assert queue_screens.transcreation_screen(bea, "q", "de").caption_id == study["r0"]  # bea rated it
    with session_scope(engine) as s:
        submit_rating(s, s.merge(accounts["root"]), study["r0"], 0.9)
    assert quality.review_screen(ann, "q").caption_id == study["r0"]
    assert queue_screens.transcreation_screen(ann, "q", "de").caption_id == study["r0"]  # complete: k ratings


def _rate(engine, accounts, caption_id, values):
    with session_scope(engine) as s:
        for name, value in zip(("ann", "bea", "cal"), values):
            submit_rating(s, s.merge(accounts[name]), caption_id, value)


def test_review_queue_puts_the_largest_spread_first_and_adjudication_leaves_ratings_alone(engine, accounts, study,
                                                                                         tmp_path):
    _rate(engine, accounts, study["r0"], (0.5, 0.55, 0.6))  # spread 0.1
    _rate(engine, accounts, study["r1"], (0.1, 0.9, 0.5))  # spread 0.8
    _rate(engine, accounts, study["r2"], (0.3, 0.7, 0.65))  # spread 0.4, mean 0.55
    _rate(engine, accounts, study["r3"], (0.0, 1.0))  # two of three ratings: not yet
    with session_scope(engine) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        queue = quality.review_queue(s, rita, col)
        assert [(i.caption_id, round(i.spread, 3)) for i in queue] == [(study["r1"], 0.8), (study["r2"], 0.4),
                                                                        (study["r0"], 0.1)]
        assert queue[0].values == [0.1, 0.5, 0.9] and queue[0].mean == pytest.approx(0.5)
        quality.add_reviewer(s, rita, col, "bea")
    bea = _id(engine, "bea")
    screen = quality.review_screen(bea, "q")
    assert screen.caption_id == study["r1"] and "0.10, 0.50, 0.90" in screen.ratings and screen.waiting == 3
    assert screen.mean == pytest.approx(0.5)  # where the reviewer's value starts
    after = quality.settle_and_next(bea, "q", study["r1"], 0.7, "the ball is half hidden")
    assert after.caption_id == study["r2"] and after.waiting == 2 and "Settled caption" in after.message
    assert after.mean == pytest.approx(0.55)
    with pytest.raises(ValueError, match="2 of its 3 ratings"):
        quality.settle_and_next(bea, "q", study["r3"], 0.5)
    quality.settle_and_next(bea, "q", study["r1"], 0.75)  # again: replaces the value, one row
    with session_scope(engine, read_only=True) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        adjudications = list(s.scalars(select(Adjudication)))
        assert [(a.caption_id, a.overall, a.ratings_seen, round(a.spread, 3), a.note) for a in adjudications] == \
            [(study["r1"], 0.75, 3, 0.8, None)]
        assert sorted(s.scalars(select(Rating.overall).where(Rating.caption_id == study["r1"]))) == [0.1, 0.5, 0.9]
        ratings = [r for r in ratings_table(s, rita, col) if r["caption_id"] == study["r1"]]
        assert len(ratings) == 3 and {(r["adjudicated_overall"], r["adjudicated_by"]) for r in ratings} == \
            {(0.75, "bea")}
        assert [r["overall"] for r in ratings] == [0.1, 0.9, 0.5]
        by_caption = {r["caption_id"]: r for r in captions_table(s, rita, col)}
        assert by_caption[study["r1"]]["adjudicated_overall"] == 0.75
        assert by_caption[study["r1"]]["human_score"] == pytest.approx(0.5)  # the raw mean, unchanged
        assert by_caption[study["r2"]]["adjudicated_overall"] is None
        export_table(s, rita, "ratings", tmp_path / "r.csv", "csv", col)
    assert "adjudicated_overall" in (tmp_path / "r.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("action", [
    lambda s, u, c, ids: quality.set_quality(s, u, c, check_rate=0.5),
    lambda s, u, c, ids: quality.add_check_item(s, u, c, ids["r0"], "gold", 0.5),
    lambda s, u, c, ids: quality.remove_check_item(s, u, c, ids["g0"]),
    lambda s, u, c, ids: quality.check_items(s, u, c),
    lambda s, u, c, ids: quality.participants(s, u, c),
    lambda s, u, c, ids: quality.resume(s, u, c, "bea"),
    lambda s, u, c, ids: quality.allow_new_attempt(s, u, c, "bea"),
    lambda s, u, c, ids: quality.add_reviewer(s, u, c, "ann"),
    lambda s, u, c, ids: quality.review_queue(s, u, c),
    lambda s, u, c, ids: quality.adjudicate(s, u, c, ids["r0"], 0.5),
], ids=["settings", "add-check", "remove-check", "read-checks", "participants", "resume", "retry", "reviewer",
        "review-queue", "adjudicate"])
def test_an_annotators_requests_for_researcher_and_reviewer_actions_are_refused(engine, accounts, study, action):
    with session_scope(engine) as s:
        with pytest.raises(PermissionError):
            action(s, s.merge(accounts["ann"]), get_collection(s, "q"), study)
    ann = _id(engine, "ann")
    for call in (lambda: quality.quality_view(ann, "q"), lambda: quality.review_screen(ann, "q"),
                 lambda: quality.save_quality(ann, "q", 0.5, 0.1, 0.5, 3, True),
                 lambda: quality.manage_annotator(ann, "q", "ann", "reviewer"),
                 lambda: quality.settle_and_next(ann, "q", study["r0"], 0.5)):
        with pytest.raises(PermissionError):
            call()


def test_bad_settings_and_check_items_are_refused_with_a_reason(engine, accounts, study):
    with session_scope(engine) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        for values, match in (({"check_rate": 1.5}, "between 0 and 1"), ({"qualification_pass": "x"}, "a number"),
                              ({"min_checks": 0}, "whole number from 1"), ({"min_checks": 2.5}, "whole number")):
            with pytest.raises(ValueError, match=match):
                quality.set_quality(s, rita, col, **values)
        with pytest.raises(ValueError, match="check item already"):
            quality.add_check_item(s, rita, col, study["g0"], "gold", 0.5)
        with pytest.raises(ValueError, match="needs its instruction"):
            quality.add_check_item(s, rita, col, study["r0"], "attention", 0.0)
        with pytest.raises(ValueError, match="unknown kind"):
            quality.add_check_item(s, rita, col, study["r0"], "silver", 0.0)
        submit_rating(s, s.merge(accounts["ann"]), study["r1"], 0.4)
        with pytest.raises(ValueError, match="already has 1 rating"):
            quality.add_check_item(s, rita, col, study["r1"], "gold", 0.4)
        other = get_or_create_collection(s, rita, "other")
        with pytest.raises(ValueError, match="not in collection other"):
            quality.add_check_item(s, rita, other, study["r2"], "gold", 0.4)
    _settings(engine, accounts, check_rate=1.0)
    queue_screens.rate_and_next(_id(engine, "ann"), "q", queue_screens.rating_screen(_id(engine, "ann"), "q")
                                .caption_id, 0.9)
    with session_scope(engine) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        answered = [row[0] for row in quality.quality_view(_id(engine, "rita"), "q").items if row[5] == 1]
        with pytest.raises(ValueError, match="stays one"):
            quality.remove_check_item(s, rita, col, answered[0])
        quality.remove_check_item(s, rita, col, study["q0"])  # never answered: goes
        assert study["q0"] not in [i.caption_id for i in quality.check_items(s, rita, col)]


@pytest.mark.parametrize("empty_db_url", ["sqlite"], indirect=True)
def test_gold_accuracy_in_the_cli_and_the_exports_agreement(db_url, accounts, study, tmp_path):
    engine = get_engine(db_url)
    _settings(engine, accounts, check_rate=1 / 3, accuracy_threshold=0.9, min_checks=1)
    _serve_and_answer(_id(engine, "ann"), study, gold_value=0.9, attention_value=0.4)  # 1 of 2
    _serve_and_answer(_id(engine, "bea"), study, gold_value=0.95, attention_value=0.0)  # 2 of 2
    with session_scope(engine, read_only=True) as s:
        rita, col = s.merge(accounts["rita"]), get_collection(s, "q")
        expected = study_agreement(s, rita, col).to_dict()
        summary = export_table(s, rita, "ratings", tmp_path / "r.jsonl", "jsonl", col)
    accuracy = {a["annotator"]: a["gold_accuracy"] for a in expected["annotators"]}
    assert accuracy == {"ann": 0.5, "bea": 1.0}
    assert summary["agreement"]["q"] == expected
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "db", "agreement", "--collection", "q", "--user", "rita"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=180)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dashboard"] == expected
    assert {(r["annotator"], r["gold_accuracy"], r["flagged"]) for r in report["quality"]} == \
        {("ann", 0.5, True), ("bea", 1.0, False)}
