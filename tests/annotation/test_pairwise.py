"""Pairwise judgments (issue 24): pairs from a collection's captions or a pair file, the blind
left/right order, the k-way queue with Back and Skip, each metric's accuracy against the human
majority, the sources' Bradley–Terry ranking, and the Pascal-50S export read back by its loader."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import select

from annotation.studies import pairwise
from annotation.captions import add_caption, get_collection, get_or_create_collection
from annotation.image_store import add_image
from db.models import PairwiseItem, PairwiseJudgment
from db.session import session_scope
from scoring.analysis.bradley_terry import bradley_terry
from scoring.analysis.datasets import load_pascal50s
from scoring.analysis.pairwise import human_preference
from tests.database_fixtures import png_bytes


def _study(engine, accounts, make_png, name="duel"):
    """Image 0: captions of m1, m2, m3, a second m1 and a reference; image 1: m1 and m2."""
    with session_scope(engine) as s:
        col = get_or_create_collection(s, accounts["rita"], name)
        first = add_image(s, make_png((10, 20, 30)), "zero.png")
        second = add_image(s, make_png((90, 20, 30)), "one.png")
        ids = {}
        for key, image, text, model, kind in [
                ("m1", first, "a dog on grass", "m1", "candidate"), ("m2", first, "a cat on a sofa", "m2", "candidate"),
                ("m3", first, "a brown dog runs", "m3", "candidate"), ("m1b", first, "dog grass", "m1", "candidate"),
                ("ref", first, "a brown dog running on the grass", None, "reference"),
                ("x1", second, "a red car", "m1", "candidate"), ("x2", second, "a red bus", "m2", "candidate")]:
            ids[key] = add_caption(s, accounts["rita"], image, text, kind=kind, source_model=model, collection=col).id
    return ids


def _pairs(engine, name="duel"):
    with session_scope(engine, read_only=True) as s:
        return {(p.caption_a_id, p.caption_b_id): p.category for p in
                pairwise.collection_pairs(s, get_collection(s, name))}


def test_pairs_join_captions_of_one_image_from_different_sources(engine, accounts, make_png):
    ids = _study(engine, accounts, make_png)
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        with pytest.raises(PermissionError):
            pairwise.make_pairs(s, accounts["ann"], col)
        assert pairwise.make_pairs(s, accounts["rita"], col) == 6
    # image 0: m1-m2, m1-m3, m2-m3, m1b-m2, m1b-m3 (not m1-m1b: one source); image 1: x1-x2
    expected = {(ids["m1"], ids["m2"]), (ids["m1"], ids["m3"]), (ids["m2"], ids["m3"]), (ids["m2"], ids["m1b"]),
                (ids["m3"], ids["m1b"]), (ids["x1"], ids["x2"])}
    assert _pairs(engine) == {pair: "MM" for pair in expected}
    with session_scope(engine) as s:
        assert pairwise.make_pairs(s, accounts["rita"], get_collection(s, "duel")) == 0  # kept, not doubled
        assert pairwise.make_pairs(s, accounts["rita"], get_collection(s, "duel"), include_references=True) == 4
    pairs = _pairs(engine)
    assert pairs[(ids["m1"], ids["ref"])] == "HM" and len(pairs) == 10


def test_a_pair_file_is_checked_whole_and_names_the_bad_row(engine, accounts, make_png, tmp_path):
    ids = _study(engine, accounts, make_png)
    good = tmp_path / "pairs.csv"
    good.write_text(f"caption_a,caption_b,category\n{ids['m1']},a cat on a sofa,\n"
                    f"a red bus,a red car,HC\n")
    bad = tmp_path / "pairs.jsonl"
    bad.write_text(json.dumps({"caption_a": "a dog on grass", "caption_b": "a cat on a sofa"}) + "\n"
                   + json.dumps({"caption_a": "a dog on grass", "caption_b": "a red car"}) + "\n")
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        with pytest.raises(ValueError, match="row 2: caption_a and caption_b describe different images"):
            pairwise.import_pairs(s, accounts["rita"], col, pairwise.read_pair_file(bad))
    assert _pairs(engine) == {}  # nothing of the file was stored
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        with pytest.raises(ValueError, match="row 1: caption_b 'no such caption' is not a caption"):
            pairwise.import_pairs(s, accounts["rita"], col, [{"caption_a": "a red car", "caption_b": "no such caption"}])
        with pytest.raises(ValueError, match="row 1: category 'XX'"):
            pairwise.import_pairs(s, accounts["rita"], col, [{"caption_a": "a red car", "caption_b": "a red bus",
                                                              "category": "XX"}])
        assert pairwise.import_pairs(s, accounts["rita"], col, pairwise.read_pair_file(good)) == 2
    assert _pairs(engine) == {(ids["m1"], ids["m2"]): "MM", (ids["x1"], ids["x2"]): "HC"}


def test_blind_order_is_fixed_per_annotator_and_pair_and_about_half_left():
    sides = [pairwise.a_on_left(7, item) for item in range(400)]
    assert sides == [pairwise.a_on_left(7, item) for item in range(400)]  # the same every time
    assert 160 < sum(sides) < 240
    assert sides != [pairwise.a_on_left(8, item) for item in range(400)]  # another annotator, another order


def test_queue_gives_each_pair_k_judgments_and_stores_the_side_as_a_or_b(engine, accounts, make_png):
    _study(engine, accounts, make_png)
    with session_scope(engine) as s:
        pairwise.make_pairs(s, accounts["rita"], get_collection(s, "duel"))
    done = {}
    for name in ("ann", "bea", "cal"):
        while True:
            with session_scope(engine) as s:
                col = get_collection(s, "duel")
                item = pairwise.next_pair(s, accounts[name], col, k=2)
                if item is None:
                    break
                side = "left" if item.id % 2 else "right"
                judgment = pairwise.judge_pair(s, accounts[name], item.id, side, k=2)
                left_is_a = pairwise.a_on_left(accounts[name].id, item.id)
                assert judgment.choice == ("a" if (side == "left") == left_is_a else "b")
                assert judgment.a_left == left_is_a
                done.setdefault(name, []).append(item.id)
    assert len(done["ann"]) == 6 and len(done["bea"]) == 6 and "cal" not in done  # k = 2: nothing left for cal
    with session_scope(engine, read_only=True) as s:
        counts = pd.Series([j.item_id for j in s.scalars(select(PairwiseJudgment))]).value_counts()
    assert set(counts) == {2}


def test_a_live_offer_counts_towards_k_and_a_full_pair_refuses_a_late_judgment(engine, accounts, make_png):
    _study(engine, accounts, make_png)
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        pairwise.make_pairs(s, accounts["rita"], col)
        offered = pairwise.next_pair(s, accounts["ann"], col, k=1).id
        others = set()
        while (item := pairwise.next_pair(s, accounts["bea"], col, k=1)) is not None:
            others.add(item.id)
            pairwise.judge_pair(s, accounts["bea"], item.id, "tie", k=1)
        assert offered not in others and len(others) == 5
        with pytest.raises(ValueError, match="already has its 1 judgments"):
            pairwise.judge_pair(s, accounts["cal"], next(iter(others)), "left", k=1)
        assert pairwise.judge_pair(s, accounts["ann"], offered, "right", k=1).choice in ("a", "b")


def test_screen_back_and_skip_keep_the_blind_order(engine, accounts, make_png):
    _study(engine, accounts, make_png)
    with session_scope(engine) as s:
        pairwise.make_pairs(s, accounts["rita"], get_collection(s, "duel"))
    ann = accounts["ann"].id
    first = pairwise.pair_screen(ann, "duel")
    assert first.can_judge and first.progress.startswith("You judged 0 of 6 pairs")
    with session_scope(engine, read_only=True) as s:
        item = s.get(PairwiseItem, first.item_id)
        a, b = item.caption_a.text, item.caption_b.text
    assert (first.left, first.right) == ((a, b) if pairwise.a_on_left(ann, first.item_id) else (b, a))
    second = pairwise.judge_and_next(ann, "duel", first.item_id, "left")
    third = pairwise.skip_and_next(ann, "duel", second.item_id)
    back = pairwise.earlier_pair_screen(ann, "duel", third.item_id)
    assert back.item_id == second.item_id and "skipped" in back.message and back.chosen is None
    back = pairwise.earlier_pair_screen(ann, "duel", back.item_id)
    assert (back.item_id, back.left, back.right, back.chosen) == (first.item_id, first.left, first.right, "left")
    pairwise.judge_and_next(ann, "duel", first.item_id, "tie")  # changes the judgment
    with session_scope(engine, read_only=True) as s:
        own = s.scalar(select(PairwiseJudgment).where(PairwiseJudgment.item_id == first.item_id,
                                                      PairwiseJudgment.annotator_id == ann))
        assert (own.choice, own.version) == ("tie", 2)
    with pytest.raises(ValueError, match="choose left, right or tie"):
        pairwise.judge_and_next(ann, "duel", first.item_id, "both")
    with pytest.raises(ValueError, match="^choose left, right or tie, not 'A'$"):  # as sent, not lower-cased
        pairwise.judge_and_next(ann, "duel", first.item_id, "A")
    pairwise.judge_and_next(ann, "duel", first.item_id, " Right ")  # case and spaces do not matter
    with session_scope(engine, read_only=True) as s:
        own = s.scalar(select(PairwiseJudgment).where(PairwiseJudgment.item_id == first.item_id,
                                                      PairwiseJudgment.annotator_id == ann))
        assert own.choice == ("b" if pairwise.a_on_left(ann, first.item_id) else "a")


def test_a_judgment_sent_for_one_collection_never_lands_on_another_collections_pair(engine, accounts, make_png):
    """/judge_pair for "empty" with a pair id of "duel" was saved on duel's pair (a trial); it is
    refused and nothing is stored. A collection without pairs says so once, where the pair goes."""
    _study(engine, accounts, make_png)
    with session_scope(engine) as s:
        pairwise.make_pairs(s, accounts["rita"], get_collection(s, "duel"))
        get_or_create_collection(s, accounts["rita"], "empty")
        pair_id = s.scalar(select(PairwiseItem.id))
    ann = accounts["ann"].id
    for act in (lambda: pairwise.judge_and_next(ann, "empty", pair_id, "tie"),
                lambda: pairwise.skip_and_next(ann, "empty", pair_id)):
        with pytest.raises(LookupError, match=f"^Pair {pair_id} is not a pair of collection 'empty'; nothing was saved"):
            act()
    with session_scope(engine, read_only=True) as s:
        assert s.scalar(select(PairwiseJudgment.id)) is None
    screen = pairwise.pair_screen(ann, "empty")
    assert (screen.item_id, screen.left, screen.message) == (
        None, "This collection has no pairs to compare yet: a researcher makes them in the Pairwise tab.", "")


def _judge(engine, accounts, votes: dict) -> dict:
    """votes: {(key_a, key_b): [(annotator, "a" | "b" | "tie"), ...]} stored through judge_pair."""
    ids = _study(engine, accounts, png_bytes)
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        pairwise.make_pairs(s, accounts["rita"], col)
        items = {(p.caption_a_id, p.caption_b_id): p.id for p in pairwise.collection_pairs(s, col)}
        for (ka, kb), choices in votes.items():
            item = items[(ids[ka], ids[kb])]
            for name, choice in choices:
                a_left = pairwise.a_on_left(accounts[name].id, item)
                side = "tie" if choice == "tie" else ("left" if (choice == "a") == a_left else "right")
                pairwise.judge_pair(s, accounts[name], item, side)
    return ids


VOTES = {("m1", "m2"): [("ann", "a"), ("bea", "a"), ("cal", "b")],   # A preferred 2-1
         ("m1", "m3"): [("ann", "b"), ("bea", "b")],                 # B preferred
         ("m2", "m3"): [("ann", "a"), ("bea", "tie")],               # A preferred 1-0, one tie
         ("x1", "x2"): [("ann", "tie"), ("bea", "tie")]}             # only ties: no human preference


def test_metric_accuracy_against_the_majority_by_hand(engine, accounts):
    ids = _judge(engine, accounts, VOTES)
    with session_scope(engine, read_only=True) as s:
        pairs = pairwise.pair_votes(s, accounts["rita"], get_collection(s, "duel"))
    by_pair = pairs.set_index(["caption_a_id", "caption_b_id"])
    assert by_pair.loc[(ids["m1"], ids["m2"]), ["votes_a", "votes_b", "ties"]].tolist() == [2, 1, 0]
    assert by_pair.loc[(ids["m2"], ids["m3"]), ["votes_a", "votes_b", "ties"]].tolist() == [1, 0, 1]
    # Metric G right on (m1,m2), a tie on (m1,m3), wrong on (m2,m3): (1 + 0.5 + 0) / 3.
    # Metric R right on (m1,m2) and (m1,m3), wrong on (m2,m3) (the humans' preferences form a
    # cycle, so no metric gets all three): 2 / 3. Both leave out (x1,x2), which has no majority.
    scores = pd.DataFrame({"caption_id": [ids[k] for k in ("m1", "m2", "m3", "m1b", "x1", "x2")],
                           "G": [0.9, 0.1, 0.1, 0.5, 0.3, 0.9], "R": [0.5, 0.2, 0.8, 0.5, 0.0, 1.0]})
    accuracy, _ = pairwise.metric_accuracy(pairs, scores, ["G", "R"])
    table = accuracy.set_index("metric")
    assert table.loc["G", "MM"] == pytest.approx(0.5) and table.loc["G", "mean"] == pytest.approx(0.5)
    assert table.loc["R", "MM"] == pytest.approx(2 / 3) and table.loc["R", "n"] == 3
    assert pd.isna(table.loc["R", "HC"])
    assert table.loc["G", "n"] == 3


def test_source_ranking_from_the_judgments(engine, accounts):
    _judge(engine, accounts, VOTES)
    with session_scope(engine, read_only=True) as s:
        judgments = pairwise.judgments_table(s, accounts["rita"], get_collection(s, "duel"))
    assert len(judgments) == 9
    ranking = pairwise.source_ranking(judgments, n_boot=100).table.set_index("system")
    # wins (ties half): m1 2 + 0 + 0.5 (x1-x2 tie) + 0.5 = 3; m2 1 + 1 + 0.5 + 0.5 + 0.5 = 3.5; m3 2 + 0.5 = 2.5
    assert ranking["wins"].to_dict() == {"m2": 3.5, "m1": 3.0, "m3": 2.5}
    assert ranking["comparisons"].to_dict() == {"m1": 7, "m2": 7, "m3": 4}
    # The same strengths as Bradley-Terry on the nine judgments listed by hand; m3 wins 2.5 of
    # its 4 comparisons, so it ranks first although m2 has more wins.
    listed = bradley_terry(["m1", "m1", "m1", "m1", "m1", "m2", "m2", "m1", "m1"],
                           ["m2", "m2", "m2", "m3", "m3", "m3", "m3", "m2", "m2"],
                           [1, 1, 0, 0, 0, 1, 0.5, 0.5, 0.5])
    assert ranking["strength"].to_dict() == pytest.approx(listed, abs=1e-7)
    assert list(ranking.index) == ["m3", "m2", "m1"] and list(ranking["rank"]) == [1, 2, 3]


def test_export_reads_back_as_the_same_pairs_and_majority(engine, accounts, tmp_path):
    _judge(engine, accounts, VOTES)
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        with pytest.raises(PermissionError):
            pairwise.export_pascal50s(s, accounts["ann"], col, tmp_path / "no")
        written = pairwise.export_pascal50s(s, accounts["rita"], col, tmp_path / "pascal")
        pairs = pairwise.pair_votes(s, accounts["rita"], col)
    assert (written["pairs"], written["judgments"]) == (4, 9)
    loaded = load_pascal50s(tmp_path / "pascal")
    judged = pairs[pairs["votes_a"] + pairs["votes_b"] + pairs["ties"] > 0].reset_index(drop=True)
    columns = ["image_id", "caption_a", "caption_b", "category", "votes_a", "votes_b"]
    assert loaded[columns].to_dict("records") == judged[columns].to_dict("records")
    assert list(human_preference(loaded["votes_a"], loaded["votes_b"])) == \
        list(human_preference(judged["votes_a"], judged["votes_b"]))
    assert loaded["references"][0] == ["a brown dog running on the grass"] * 3


def test_the_pascal50s_download_stays_in_its_folder_whatever_the_collection_is_called(engine, accounts,
                                                                                      tmp_path):
    name = "../../../escaped"
    ids = _study(engine, accounts, png_bytes, name=name)
    with session_scope(engine) as s:
        col = get_collection(s, name)
        pairwise.make_pairs(s, accounts["rita"], col)
        item = {(p.caption_a_id, p.caption_b_id): p.id for p in pairwise.collection_pairs(s, col)}[(ids["m1"], ids["m2"])]
        pairwise.judge_pair(s, accounts["ann"], item, "left")
    folder = tmp_path / "downloads" / "request"
    folder.mkdir(parents=True)
    download, summary = pairwise.pascal50s_download(accounts["rita"].id, name, folder)
    assert Path(download).parent == folder and summary["judgments"] == 1
    assert sorted(p.name for p in folder.iterdir()) == [Path(download).name]
    assert not list(tmp_path.rglob("*.mat"))  # nothing unzipped left anywhere, in or out of the folder


def test_cli_study_accuracy_equals_the_exported_files_through_analyze_pascal50s(engine, accounts, tmp_path, capsys):
    """`caplens analyze pascal50s --collection` (the study, as the Pairwise tab computes it) and
    `--pascal-dir` with the export plus the same scores as a --scores file give the same table."""
    from app.cli import main
    from scoring.api import Scorer

    _judge(engine, accounts, VOTES)
    assert main(["analyze", "pascal50s", "--collection", "duel", "--metrics", "BLEU-1", "ROUGE-L", "--profile",
                 "tiny", "--out", str(tmp_path / "study.csv")]) == 0
    printed = capsys.readouterr().out
    assert "9 judgments by 3 annotators; 3 of 6 pairs have a human preference" in printed
    assert "Bradley-Terry ranking" in printed and "m3" in printed
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        pairwise.export_pascal50s(s, accounts["rita"], col, tmp_path / "pascal")
        report = pairwise.pairwise_analysis(s, accounts["rita"], "duel", Scorer("tiny"), ["BLEU-1", "ROUGE-L"])
    exported = load_pascal50s(tmp_path / "pascal")
    by_text = report.pairs.set_index(["caption_a", "caption_b"])
    scores = pd.DataFrame({"pair_id": exported["pair_id"]})
    for metric in ("BLEU-1", "ROUGE-L"):
        for side in ("a", "b"):
            scores[f"{metric}_{side}"] = [by_text.loc[(a, b), f"{metric}_{side}"]
                                          for a, b in zip(exported["caption_a"], exported["caption_b"])]
    scores.to_csv(tmp_path / "scores.csv", index=False)
    assert main(["analyze", "pascal50s", "--scores", str(tmp_path / "scores.csv"), "--pascal-dir",
                 str(tmp_path / "pascal"), "--out", str(tmp_path / "files.csv")]) == 0
    study = pd.read_csv(tmp_path / "study.csv")
    files = pd.read_csv(tmp_path / "files.csv")
    assert study["n"].tolist() == [3, 3]
    pd.testing.assert_frame_equal(study, files)


def test_db_pairs_command_makes_imports_and_exports(engine, accounts, tmp_path, capsys):
    from app.cli import main

    _study(engine, accounts, png_bytes)
    pair_file = tmp_path / "extra.jsonl"
    pair_file.write_text(json.dumps({"caption_a": "a dog on grass", "caption_b": "a brown dog running on the grass",
                                     "category": "HM"}) + "\n")
    assert main(["db", "pairs", "--collection", "duel", "--make", "--import", str(pair_file)]) == 0
    assert json.loads(capsys.readouterr().out) == {"made": 6, "imported": 1, "pairs": 7}
    with session_scope(engine) as s:
        item = pairwise.next_pair(s, accounts["ann"], get_collection(s, "duel"))
        pairwise.judge_pair(s, accounts["ann"], item.id, "tie")
    assert main(["db", "pairs", "--collection", "duel", "--export", str(tmp_path / "out")]) == 0
    assert json.loads(capsys.readouterr().out)["exported"]["judgments"] == 1
    assert load_pascal50s(tmp_path / "out")[["votes_a", "votes_b"]].values.tolist() == [[0, 0]]
    bad = tmp_path / "bad.csv"
    bad.write_text("caption_a,caption_b\na dog on grass,nothing like it\n")
    assert main(["db", "pairs", "--collection", "duel", "--import", str(bad)]) == 2
    assert "row 1: caption_b 'nothing like it' is not a caption" in capsys.readouterr().err
    assert len(_pairs(engine)) == 7


def test_the_studys_quality_control_holds_for_pairs_too(engine, accounts, make_png):
    """An annotator who has not passed the qualification round, or is paused, gets no pair and
    cannot judge one through the library (as the API would); resumed, they get pairs again."""
    from annotation.studies import quality
    from db.models import StudyParticipant, utcnow

    ids = _study(engine, accounts, make_png)
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        pairwise.make_pairs(s, accounts["rita"], col)
        quality.set_quality(s, accounts["rita"], col, qualification_pass=0.5)
        quality.add_check_item(s, accounts["rita"], col, ids["x1"], "qualification", 0.8, 0.1)
        item_id = s.scalars(select(PairwiseItem.id).where(PairwiseItem.collection_id == col.id)).first()
    ann = accounts["ann"].id
    screen = pairwise.pair_screen(ann, "duel")
    assert screen.item_id is None and not screen.can_judge
    assert screen.left.startswith("Pass the qualification round of duel first")
    with pytest.raises(PermissionError, match="qualification round"):
        pairwise.judge_and_next(ann, "duel", item_id, "left")

    with session_scope(engine) as s:  # passed, then paused by the checks
        col = get_collection(s, "duel")
        s.add(StudyParticipant(collection_id=col.id, annotator_id=ann, qualification="passed",
                               paused_at=utcnow(), pause_reason="You are paused in duel: 1 of 4 checks right."))
    screen = pairwise.pair_screen(ann, "duel")
    assert screen.item_id is None and screen.left.startswith("You are paused in duel")
    with pytest.raises(PermissionError, match="paused"):
        pairwise.judge_and_next(ann, "duel", item_id, "left")
    with session_scope(engine) as s:
        quality.resume(s, accounts["rita"], get_collection(s, "duel"), "ann")
    assert pairwise.pair_screen(ann, "duel").can_judge
    with session_scope(engine, read_only=True) as s:
        assert s.scalar(select(PairwiseJudgment.id).where(PairwiseJudgment.choice.is_not(None))) is None


def test_a_pair_file_is_read_as_strictly_as_an_import(tmp_path):
    """The one strict CSV reader of imports: a doubled quote is a quote; a stray one in a quoted
    caption is refused with the file and line, not matched as the changed text 'a red" car"'."""
    path = tmp_path / "pairs.csv"
    path.write_text('caption_a,caption_b\n"a ""red"" car",a bus\n')
    assert pairwise.read_pair_file(path) == [{"caption_a": 'a "red" car', "caption_b": "a bus"}]
    path.write_text('caption_a,caption_b\na bus,a cat\n"a "red" car",a bus\n')
    with pytest.raises(ValueError, match=r'^pairs\.csv line 3: text follows the quote that closes a quoted field'):
        pairwise.read_pair_file(path)


def test_sources_never_compared_across_groups_are_flagged_in_the_summary_and_the_table():
    # m1-m2 and m3-m4 are never compared: the report's summary says so and the tab's table
    # names each source's group; ranks count within a group.
    from app.tabs.pairwise import ranking_rows

    judgments = pd.DataFrame({"pair_id": [1, 1, 2, 3, 3, 4], "annotator": ["ann"] * 6,
                              "choice": ["a", "a", "b", "a", "tie", "a"], "a_left": [True] * 6,
                              "seconds": [1.0] * 6,
                              "source_a": ["m1", "m1", "m1", "m3", "m3", "m3"],
                              "source_b": ["m2", "m2", "m2", "m4", "m4", "m4"]})
    ranking = pairwise.source_ranking(judgments, n_boot=20)
    assert ranking.groups == [["m1", "m2"], ["m3", "m4"]]
    pairs = pd.DataFrame({"votes_a": [2], "votes_b": [0]})
    report = pairwise.PairwiseReport(pd.DataFrame(), ranking, pairs, 6, 1, {})
    assert "2 groups never compared with one another (group 1: m1, m2; group 2: m3, m4)" in report.summary
    rows = ranking_rows(ranking)
    assert [row[:2] for row in rows] == [[1, "m1 (group 1)"], [2, "m2 (group 1)"], [1, "m3 (group 2)"],
                                        [2, "m4 (group 2)"]]
    # Two sources: shares are win shares within each group. m1 wins 2 of 3 (2/3, 1/3); m3 wins
    # 2.5 of 3, the tie counting half (5/6, 1/6).
    assert [row[2] for row in rows] == pytest.approx([0.667, 0.333, 0.833, 0.167], abs=1e-3)


def _prefer(session, accounts, collection, better) -> None:
    """ann, bea and cal each judge every pair of `collection`, choosing `better(item)` ("a" or "b")."""
    for item in pairwise.collection_pairs(session, collection):
        choice = better(item)
        for name in ("ann", "bea", "cal"):
            side = "left" if (choice == "a") == pairwise.a_on_left(accounts[name].id, item.id) else "right"
            pairwise.judge_pair(session, accounts[name], item.id, side)


def test_pairs_with_a_reference_are_scored_without_their_own_reference(engine, accounts):
    """HM pairs (make_pairs with include_references) used to have no score for the reference
    caption (collection_scores leaves references out), so they were dropped: HM NaN and a
    "mean" that was MM alone, n = 1. Each side of an HM pair is now scored against the image's
    other references (the pair's reference left out), by hand with ROUGE-L (LCS F-measure,
    beta = 1.2, best precision and best recall over the references):
      reference "a dog" against "a cat", "a bird": LCS 1, P = R = 1/2, F = 0.5 (so every
        reference scores 0.5 against the other two);
      "a dog runs" against "a cat", "a bird": P = 1/3, R = 1/2, F = 2.44/6 / (1/2 + 1.44/3) = 0.41497;
      "a dog runs" with "a dog" among the references: P = 2/3, R = 1, F = 2.44 * 2/3 / (1 + 1.44 * 2/3) = 0.82993;
      "two birds fly": nothing in common, 0.
    The annotators prefer the reference in every HM pair and "a dog runs" in the MM pair.
    HM: "a dog runs" is right against "a dog" (0.41497 < 0.5), wrong against "a cat" and
    "a bird" (0.82993 > 0.5); "two birds fly" loses to each reference: 4 of 6. MM: 0.82993 > 0.
    Mean (2/3 + 1) / 2 = 5/6 over the 7 pairs."""
    from scoring.api import Scorer

    with session_scope(engine) as s:
        col = get_or_create_collection(s, accounts["rita"], "refs")
        image = add_image(s, png_bytes((10, 20, 30)), "zero.png")
        ids = {}
        for key, text, model, kind in [("m1", "a dog runs", "m1", "candidate"), ("m2", "two birds fly", "m2", "candidate"),
                                       ("r1", "a dog", None, "reference"), ("r2", "a cat", None, "reference"),
                                       ("r3", "a bird", None, "reference")]:
            ids[key] = add_caption(s, accounts["rita"], image, text, kind=kind, source_model=model, collection=col).id
        assert pairwise.make_pairs(s, accounts["rita"], col, include_references=True) == 7  # 1 MM, 6 HM
        references = {ids["r1"], ids["r2"], ids["r3"]}
        _prefer(s, accounts, col, lambda item: "b" if item.caption_b_id in references else "a")
    with session_scope(engine) as s:
        report = pairwise.pairwise_analysis(s, accounts["rita"], "refs", Scorer("tiny"), ["ROUGE-L"], n_boot=10)
    pairs = report.pairs.set_index(["caption_a_id", "caption_b_id"])
    assert pairs.loc[(ids["m1"], ids["r1"]), ["ROUGE-L_a", "ROUGE-L_b"]].tolist() == pytest.approx([0.41497, 0.5],
                                                                                                  abs=1e-5)
    assert pairs.loc[(ids["m1"], ids["r2"]), ["ROUGE-L_a", "ROUGE-L_b"]].tolist() == pytest.approx([0.82993, 0.5],
                                                                                                  abs=1e-5)
    assert pairs.loc[(ids["m2"], ids["r3"]), ["ROUGE-L_a", "ROUGE-L_b"]].tolist() == pytest.approx([0.0, 0.5])
    assert pairs.loc[(ids["m1"], ids["m2"]), ["ROUGE-L_a", "ROUGE-L_b"]].tolist() == pytest.approx([0.82993, 0.0],
                                                                                                  abs=1e-5)
    row = report.accuracy.set_index("metric").loc["ROUGE-L"]
    assert row["HM"] == pytest.approx(4 / 6) and row["MM"] == pytest.approx(1.0)
    assert row["mean"] == pytest.approx(5 / 6) and row["n"] == 7
    assert report.unscored == {}


def test_pairs_that_still_cannot_be_scored_are_named_and_keep_the_mean_out(engine, accounts):
    # Image 0 of _study has one reference: left out of its own pairs, it leaves ROUGE-L no
    # reference to score them against, so the 4 HM pairs cannot be scored; image 1 has no
    # reference at all, so neither can its MM pair. The report says so, and no mean is given
    # (it would be MM's alone, not over the study's categories).
    from scoring.api import Scorer

    ids = _study(engine, accounts, png_bytes)
    with session_scope(engine) as s:
        col = get_collection(s, "duel")
        pairwise.make_pairs(s, accounts["rita"], col, include_references=True)
        _prefer(s, accounts, col, lambda item: "b" if item.caption_b_id == ids["ref"] else "a")
    with session_scope(engine) as s:
        report = pairwise.pairwise_analysis(s, accounts["rita"], "duel", Scorer("tiny"), ["ROUGE-L"], n_boot=10)
    row = report.accuracy.set_index("metric").loc["ROUGE-L"]
    assert report.unscored == {"ROUGE-L": {"HM": 4, "MM": 1}}
    assert "ROUGE-L: 4 HM pairs, 1 MM pair" in report.summary
    assert pd.isna(row["HM"]) and pd.isna(row["mean"]) and row["n"] == 5  # the 5 MM pairs of image 0
