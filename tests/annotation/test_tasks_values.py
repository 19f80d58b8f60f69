"""annotation.studies.tasks by value: the helpers its screens and imports rely on (rating values,
word spans, marked phrases, Back, seconds on an item, leases, edits, transcreation offers).
Written after mutation testing (benchmarks/mutation.py) found these reached by no value check."""
from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from annotation.captions import add_caption, get_or_create_collection
from annotation.image_store import add_image
from annotation.studies.tasks import (
    caption_words,
    critical_objects,
    delete_rating,
    earlier_queue_item,
    get_rating,
    human_score,
    join_word_spans,
    list_ratings,
    mark_critical,
    marked_phrases,
    next_critical_item,
    next_rating_item,
    next_transcreation_item,
    queue_order,
    rating_progress,
    reference_texts,
    release_lease,
    reserve_item,
    seconds_on,
    skip_item,
    submit_rating,
    submit_transcreation,
    validate_rating_values,
)
from db.models import Caption, QueueSkip, RatingLease, RatingRevision, Transcreation, utcnow
from db.session import session_scope


@pytest.fixture
def study(engine, accounts, make_png):
    """Collection `v`: image 0 with candidates a, b, c and references r1, r2 (en) and r-de (de);
    image 1 with candidate d; collection `w` with candidate e. Returns caption ids by name."""
    with session_scope(engine) as s:
        rita = s.merge(accounts["rita"])
        v, w = get_or_create_collection(s, rita, "v"), get_or_create_collection(s, rita, "w")
        im0, im1 = add_image(s, make_png((10, 0, 0)), "a.png"), add_image(s, make_png((0, 90, 0)), "b.png")
        ids = {}
        for name, image, kind, lang, col in [("r2", im0, "reference", "en", v), ("r1", im0, "reference", "en", v),
                                             ("r-de", im0, "reference", "de", v), ("a", im0, "candidate", "en", v),
                                             ("b", im0, "candidate", "en", v), ("c", im0, "candidate", "en", v),
                                             ("d", im1, "candidate", "en", v), ("e", im1, "candidate", "en", w)]:
            ids[name] = add_caption(s, rita, image, f"caption {name}", kind=kind, language=lang, collection=col).id
    return ids


def _collection(s, accounts, name="v"):
    return get_or_create_collection(s, s.merge(accounts["rita"]), name)


def test_rating_values_are_checked_field_by_field():
    assert validate_rating_values({"overall": "0.25", "fluency": 0, "relevance": 1, "descriptiveness": None}) == {
        "overall": 0.25, "fluency": 0.0, "relevance": 1.0, "descriptiveness": None}
    assert isinstance(validate_rating_values({"overall": 1})["overall"], float)
    with pytest.raises(ValueError, match="^unknown rating fields: clarity, speed$"):
        validate_rating_values({"overall": 0.5, "speed": 1, "clarity": 1})
    with pytest.raises(ValueError, match="^the overall score is required$"):
        validate_rating_values({"overall": None})
    with pytest.raises(ValueError, match=r"^fluency must be a number between 0 and 1, got 'high'$"):
        validate_rating_values({"overall": 0.5, "fluency": "high"})
    with pytest.raises(ValueError, match=r"^relevance must be a number between 0 and 1, got \[1\]$"):
        validate_rating_values({"overall": 0.5, "relevance": [1]})
    for bad in (1.0001, -0.0001, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="^overall must be between 0 and 1, got"):
            validate_rating_values({"overall": bad})


def test_caption_words_are_letter_runs_or_single_cjk_characters():
    text = "The dog's well-known ball, 2 cats_x 赤い猫"
    words = [text[a:b] for a, b in caption_words(text)]
    assert words == ["The", "dog's", "well-known", "ball", "2", "cats", "x", "赤", "い", "猫"]
    assert caption_words("a  b") == [(0, 1), (3, 4)]
    assert caption_words("") == [] and caption_words("-- ,") == []


def test_chosen_words_join_into_phrases_only_across_spaces():
    text = "a white shirt, on green grass"
    spans = caption_words(text)  # a, white, shirt, on, green, grass
    joined = join_word_spans(text, [spans[2], spans[1], spans[4], spans[5], spans[1]])  # unsorted, repeated
    assert [text[a:b] for a, b in joined] == ["white shirt", "green grass"]
    # "shirt" and "on" are separated by a comma: two phrases; "a" and "shirt" leave "white" out
    assert [text[a:b] for a, b in join_word_spans(text, [spans[2], spans[3]])] == ["shirt", "on"]
    assert [text[a:b] for a, b in join_word_spans(text, [spans[0], spans[2]])] == ["a", "shirt"]
    assert join_word_spans(text, [("2", "7")]) == [(2, 7)]
    assert join_word_spans(text, [(2, 13), (8, 13)]) == [(2, 13)]  # a span inside the last one
    assert join_word_spans(text, []) == []


def test_marked_phrases_store_phrases_and_their_spans():
    text = "A White shirt on green grass"
    marked = marked_phrases(text, " white shirt ,grass,, white shirt", [(17, 22)], ["ON"])
    # typed phrases are kept as typed (stripped); a span's phrase is the caption's text
    assert marked == {"critical_objects": ["white shirt", "grass"], "backgrounds": ["green"],
                      "relationships": ["ON"],
                      "spans": {"critical_objects": [[2, 13], [23, 28]], "backgrounds": [[17, 22]],
                                "relationships": [[14, 16]]}}
    assert marked_phrases(text, ["grass", "  ", (23, 28)])["critical_objects"] == ["grass"]  # same phrase once
    assert marked_phrases(text, ["grass"])["backgrounds"] == [] and marked_phrases(text, ["grass"])["spans"]["backgrounds"] == []
    with pytest.raises(ValueError, match=r"^not in the caption text: 'red hat'$"):
        marked_phrases(text, ["red hat"])
    with pytest.raises(ValueError, match=r"^critical objects: a span is \(start, end\), got 3$"):
        marked_phrases(text, [3])
    for span, message in [((0, 29), r"span \(0, 29\) is outside the caption \(length 28\)"),
                          ((5, 5), r"span \(5, 5\) is outside"), ((-1, 3), r"span \(-1, 3\) is outside")]:
        with pytest.raises(ValueError, match=f"^backgrounds: {message}"):
            marked_phrases(text, ["grass"], [span])
    with pytest.raises(ValueError, match=r"^relationships: a span is \(start, end\), got \('a', 'b'\)$"):
        marked_phrases(text, ["grass"], (), [("a", "b")])
    assert marked_phrases(text, [(0, 28)])["critical_objects"] == [text]  # the whole caption is a span


def test_marking_again_replaces_and_objects_merge_first_marked_first(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea = s.merge(accounts["ann"]), s.merge(accounts["bea"])
        mark_critical(s, bea, study["a"], ["caption"])
        first = mark_critical(s, ann, study["a"], "a, caption")
        again = mark_critical(s, ann, study["a"], ["a"], backgrounds=["caption"])
        assert again.id == first.id and again.critical_objects == ["a"] and again.backgrounds == ["caption"]
        assert again.spans["critical_objects"] == [[8, 9]]  # the word "a", not the a inside "caption"
        assert critical_objects(s, study["a"]) == ["caption", "a"]
        assert critical_objects(s, study["b"]) == []
        with pytest.raises(ValueError, match="^mark at least one critical object$"):
            mark_critical(s, ann, study["b"], " , ")


def test_back_walks_the_rated_and_skipped_items_in_the_order_first_done(engine, accounts, study):
    with session_scope(engine) as s:
        ann, col = s.merge(accounts["ann"]), _collection(s, accounts)
        assert earlier_queue_item(s, ann, col, None) is None
        submit_rating(s, ann, study["b"], 0.5)
        skip_item(s, ann, study["c"])
        submit_rating(s, ann, study["a"], 0.5)
        submit_rating(s, ann, study["e"], 0.5)  # another collection: not on the way back
        skip_item(s, ann, study["d"], task="transcreation", language="de")  # another task: neither
        submit_rating(s, ann, study["b"], 0.9)  # editing b keeps its first place
        assert earlier_queue_item(s, ann, col, None) == study["a"]  # nothing current: the latest
        assert earlier_queue_item(s, ann, col, study["d"]) == study["a"]  # not done yet: the latest
        assert earlier_queue_item(s, ann, col, study["a"]) == study["c"]
        assert earlier_queue_item(s, ann, col, study["c"]) == study["b"]
        assert earlier_queue_item(s, ann, col, study["b"]) is None
        assert earlier_queue_item(s, s.merge(accounts["bea"]), col, study["a"]) is None


def test_seconds_on_counts_from_the_offer_and_never_goes_negative(engine, accounts, study):
    with session_scope(engine) as s:
        ann, col = s.merge(accounts["ann"]), _collection(s, accounts)
        assert seconds_on(s, ann, study["a"]) is None
        item = next_rating_item(s, ann, col)
        lease = s.scalar(select(RatingLease).where(RatingLease.caption_id == item.id))
        lease.created_at = utcnow() - timedelta(seconds=90)
        s.flush()
        assert seconds_on(s, ann, item.id) == pytest.approx(90, abs=3)
        assert seconds_on(s, s.merge(accounts["bea"]), item.id) is None  # another annotator's lease
        lease.created_at = utcnow() + timedelta(seconds=30)  # a clock ahead of ours
        s.flush()
        assert seconds_on(s, ann, item.id) == 0.0


def test_an_annotator_holds_one_lease_and_releases_it_by_item(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea = s.merge(accounts["ann"]), s.merge(accounts["bea"])

        def leases(user):
            return sorted(s.scalars(select(RatingLease.caption_id).where(RatingLease.annotator_id == user.id)))

        reserve_item(s, ann, study["a"])
        reserve_item(s, bea, study["a"])
        reserve_item(s, ann, study["b"])  # moves ann's one lease
        assert leases(ann) == [study["b"]] and leases(bea) == [study["a"]]
        expires = s.scalar(select(RatingLease.expires_at).where(RatingLease.annotator_id == ann.id))
        reserve_item(s, ann, study["b"], lease_seconds=3600)  # renewing keeps the row, moves its end
        renewed = s.scalar(select(RatingLease).where(RatingLease.annotator_id == ann.id))
        assert renewed.expires_at.replace(tzinfo=None) - expires.replace(tzinfo=None) > timedelta(seconds=3000)
        release_lease(s, ann, study["a"])  # not the one held: nothing goes
        assert leases(ann) == [study["b"]]
        release_lease(s, ann, study["b"])
        assert leases(ann) == [] and leases(bea) == [study["a"]]
        reserve_item(s, bea, study["c"])
        release_lease(s, bea)
        assert leases(bea) == []


def test_queue_offers_the_held_item_first_then_the_least_rated(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, cal = (s.merge(accounts[n]) for n in ("ann", "bea", "cal"))
        col = _collection(s, accounts)
        for user in (bea, cal):
            submit_rating(s, user, study["a"], 0.5)
        submit_rating(s, bea, study["b"], 0.5)
        submit_rating(s, cal, study["d"], 0.5)
        # c has no rating: ann gets it first, then b or d (one rating each), a (two) last
        first = next_rating_item(s, ann, col)
        assert first.id == study["c"]
        assert next_rating_item(s, ann, col).id == study["c"]  # the held lease comes first again
        submit_rating(s, ann, first.id, 0.5)
        second = next_rating_item(s, ann, col)
        assert second.id in (study["b"], study["d"])
        with pytest.raises(ValueError, match="^k must be at least 1$"):
            next_rating_item(s, ann, col, k=0)
        # k = 2: a is full for everyone; a live lease of another annotator fills b or d too
        submit_rating(s, ann, second.id, 0.5)
        assert next_rating_item(s, cal, col, k=2) is not None
        progress = rating_progress(s, ann, col, k=2)
        assert (progress.items, progress.items_complete, progress.done_by_user, progress.k) == (4, 2, 2, 2)
        assert rating_progress(s, ann, col, k=1).items_complete == 4


def test_an_expired_lease_of_another_annotator_does_not_fill_an_item(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, col = s.merge(accounts["ann"]), s.merge(accounts["bea"]), _collection(s, accounts)
        for name in ("b", "c", "d"):
            submit_rating(s, bea, study[name], 0.5)
        held = next_rating_item(s, ann, col, k=1)  # a, the only item left with k = 1
        assert held.id == study["a"]
        assert next_rating_item(s, s.merge(accounts["cal"]), col, k=1) is None  # ann's live lease fills it
        s.scalar(select(RatingLease).where(RatingLease.annotator_id == ann.id)).expires_at = utcnow() - timedelta(seconds=1)
        s.flush()
        assert next_rating_item(s, s.merge(accounts["cal"]), col, k=1).id == study["a"]
        # the clean-up after an offer removes the expired lease
        assert s.scalar(select(RatingLease.id).where(RatingLease.annotator_id == ann.id)) is None


def test_an_edit_with_the_same_values_writes_no_revision(engine, accounts, study):
    with session_scope(engine) as s:
        ann = s.merge(accounts["ann"])
        rating = submit_rating(s, ann, study["a"], 0.5, fluency=0.25)
        same = submit_rating(s, ann, study["a"], 0.5, fluency=0.25)
        assert same.id == rating.id and same.version == 1
        assert s.scalar(select(RatingRevision.id)) is None
        changed = submit_rating(s, ann, study["a"], 0.5, fluency=None)
        assert changed.version == 2 and changed.fluency is None
        revision = s.scalar(select(RatingRevision))
        assert (revision.version, revision.overall, revision.fluency) == (1, 0.5, 0.25)


def test_human_score_and_references(engine, accounts, study):
    with session_scope(engine) as s:
        assert human_score(s, study["a"]) is None
        submit_rating(s, s.merge(accounts["ann"]), study["a"], 0.2)
        submit_rating(s, s.merge(accounts["bea"]), study["a"], 0.7)
        assert human_score(s, study["a"]) == pytest.approx(0.45)
        image_id = s.get(Caption, study["a"]).image_id
        assert reference_texts(s, image_id, "en") == ["caption r2", "caption r1"]  # first stored first
        assert reference_texts(s, image_id, "en", limit=1) == ["caption r2"]
        assert reference_texts(s, image_id, "de") == ["caption r-de"]
        assert reference_texts(s, image_id, "fr") == []
        rita, parent = s.merge(accounts["rita"]), s.get(Caption, study["a"])
        for n in range(3, 8):
            add_caption(s, rita, parent.image, f"caption r{n}", kind="reference")
        assert reference_texts(s, image_id, "en") == ["caption r2", "caption r1", "caption r3", "caption r4",
                                                      "caption r5"]  # five by default, of seven


def test_transcreation_offers_only_captions_the_annotator_can_no_longer_rate(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, col = s.merge(accounts["ann"]), s.merge(accounts["bea"]), _collection(s, accounts)
        assert next_transcreation_item(s, ann, col, "de") is None  # nothing rated
        submit_rating(s, bea, study["a"], 0.6)
        assert next_transcreation_item(s, ann, col, "de") is None  # ann could still rate a (k = 3)
        assert next_transcreation_item(s, ann, col, "de", k=1).caption.id == study["a"]
        task = next_transcreation_item(s, bea, col, "de")  # bea rated a
        assert task.caption.id == study["a"] and task.source_score == pytest.approx(0.6)
        assert task.references == ["caption r2", "caption r1"] and task.target_language == "de"
        skip_item(s, bea, study["a"], task="transcreation", language="de")
        assert next_transcreation_item(s, bea, col, "de") is None
        assert next_transcreation_item(s, bea, col, "fr").caption.id == study["a"]  # skipped for German only
        submit_transcreation(s, ann, study["a"], "fr", "une légende a")
        assert next_transcreation_item(s, bea, col, "fr") is None  # done by someone in French
        with pytest.raises(ValueError, match="^target language equals the source language$"):
            next_transcreation_item(s, bea, col, "en")


def test_submitting_a_transcreation_again_edits_it(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea = s.merge(accounts["ann"]), s.merge(accounts["bea"])
        with pytest.raises(ValueError, match="has no human rating: there is no score to preserve"):
            submit_transcreation(s, ann, study["a"], "de", "Bild a")
        submit_rating(s, bea, study["a"], 0.6)
        first = submit_transcreation(s, ann, study["a"], "de", "Bild a")
        assert first.source_score == pytest.approx(0.6) and first.result_caption.kind == "transcreated"
        assert first.result_caption.parent_id == study["a"] and [c.name for c in first.result_caption.collections] == ["v"]
        submit_rating(s, ann, study["a"], 0.9)
        again = submit_transcreation(s, ann, study["a"], "de", "Bild a, neu")
        assert again.id == first.id and again.text == again.result_caption.text == "Bild a, neu"
        assert again.source_score == pytest.approx(0.75)
        other = submit_transcreation(s, bea, study["a"], "de", "Bild A")  # another annotator: another row
        assert other.id != first.id and len(s.scalars(select(Transcreation)).all()) == 2
        with pytest.raises(ValueError, match="is a transcreated caption; transcreate model candidates"):
            submit_transcreation(s, ann, again.result_caption_id, "fr", "x")
        with pytest.raises(ValueError, match="is a reference caption"):
            submit_transcreation(s, ann, study["r1"], "fr", "x")
        with pytest.raises(ValueError, match="^target language equals the caption's language$"):
            submit_transcreation(s, ann, study["a"], "en", "x")


def test_ratings_are_listed_and_withdrawn_by_their_rules(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, rita = (s.merge(accounts[n]) for n in ("ann", "bea", "rita"))
        a = submit_rating(s, ann, study["a"], 0.5)
        e = submit_rating(s, ann, study["e"], 0.5)
        b = submit_rating(s, bea, study["b"], 0.5)
        v, w = _collection(s, accounts), _collection(s, accounts, "w")
        assert [r.id for r in list_ratings(s, ann)] == [a.id, e.id]
        assert [r.id for r in list_ratings(s, ann, collection=w)] == [e.id]
        assert [r.id for r in list_ratings(s, rita)] == [a.id, e.id, b.id]
        assert [r.id for r in list_ratings(s, rita, collection=v, annotator=bea)] == [b.id]
        assert [r.id for r in list_ratings(s, ann, annotator=ann)] == [a.id, e.id]
        with pytest.raises(PermissionError, match="^ann may only read their own ratings$"):
            list_ratings(s, ann, annotator=bea)
        with pytest.raises(PermissionError, match="^ann may only withdraw their own ratings$"):
            delete_rating(s, ann, b.id)
        delete_rating(s, ann, a.id)
        delete_rating(s, rita, b.id)
        assert [r.id for r in list_ratings(s, rita)] == [e.id]
        with pytest.raises(LookupError, match=f"^no rating with id {a.id}$"):
            delete_rating(s, rita, a.id)


def test_a_skip_is_stored_once_per_task_and_language_and_ends_only_a_rating_lease(engine, accounts, study):
    with session_scope(engine) as s:
        ann = s.merge(accounts["ann"])

        def skips():
            return sorted(s.execute(select(QueueSkip.caption_id, QueueSkip.task, QueueSkip.language)
                                    .where(QueueSkip.annotator_id == ann.id)).all())

        reserve_item(s, ann, study["a"])
        skip_item(s, ann, study["a"], task="transcreation", language="de")
        assert s.scalar(select(RatingLease.caption_id).where(RatingLease.annotator_id == ann.id)) == study["a"]
        skip_item(s, ann, study["a"], task="transcreation", language="de")  # again: still one row
        skip_item(s, ann, study["a"], task="transcreation", language="fr")
        skip_item(s, ann, study["a"], task="critical")
        assert s.scalar(select(RatingLease.caption_id).where(RatingLease.annotator_id == ann.id)) == study["a"]
        skip_item(s, ann, study["a"])
        skip_item(s, ann, study["a"])
        assert s.scalar(select(RatingLease.id).where(RatingLease.annotator_id == ann.id)) is None
        assert skips() == sorted([(study["a"], "transcreation", "de"), (study["a"], "transcreation", "fr"),
                                  (study["a"], "critical", ""), (study["a"], "rating", "")])
        skip_item(s, s.merge(accounts["bea"]), study["a"])  # another annotator's skip is their own
        assert len(skips()) == 4
        with pytest.raises(LookupError):
            skip_item(s, ann, 10_000)


def test_the_critical_queue_offers_every_kind_but_perturbed_until_marked_or_skipped(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, col = s.merge(accounts["ann"]), s.merge(accounts["bea"]), _collection(s, accounts)
        rita = s.merge(accounts["rita"])
        parent = s.get(Caption, study["a"])
        add_caption(s, rita, parent.image, "caption a a", kind="perturbed", parent=parent, collection=col,
                    perturbation={"op": "repetition"})
        offered = []
        while (item := next_critical_item(s, ann, col)) is not None:
            offered.append(item.id)
            if len(offered) % 2:
                mark_critical(s, ann, item.id, [(0, 7)])
            else:
                skip_item(s, ann, item.id, task="critical")
        in_v = [study[n] for n in ("r2", "r1", "r-de", "a", "b", "c", "d")]
        assert sorted(offered) == sorted(in_v)  # references and candidates of `v`, never the perturbed one
        skip_item(s, bea, study["a"], task="rating")  # a rating skip does not hide it from bea's marking
        assert next_critical_item(s, bea, col) is not None


def test_skips_belong_to_their_annotator_collection_and_item(engine, accounts, study):
    """Written for the survivors of the 2026-11-27 mutation run in skip_item and earlier_queue_item."""
    with session_scope(engine) as s:
        ann, bea, col = s.merge(accounts["ann"]), s.merge(accounts["bea"]), _collection(s, accounts)
        reserve_item(s, ann, study["a"])
        skip_item(s, ann, study["b"])  # skipping another item leaves the lease on a
        assert s.scalars(select(RatingLease.caption_id).where(RatingLease.annotator_id == ann.id)).all() == [study["a"]]
        skip_item(s, ann, study["c"])
        skip_item(s, bea, study["c"])  # ann's skip of c does not stand for bea's
        assert s.scalar(select(QueueSkip.id).where(QueueSkip.annotator_id == bea.id,
                                                   QueueSkip.caption_id == study["c"])) is not None
        offered = []
        while (item := next_rating_item(s, bea, col)) is not None:
            offered.append(item.id)
            submit_rating(s, bea, item.id, 0.5)
        assert sorted(offered) == sorted([study["a"], study["b"], study["d"]])
        skip_item(s, ann, study["e"])  # in collection w: not on v's way back
        assert earlier_queue_item(s, ann, col, None) == study["c"]


def test_reading_a_rating_names_what_is_wrong(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, rita = (s.merge(accounts[n]) for n in ("ann", "bea", "rita"))
        rating = submit_rating(s, bea, study["a"], 0.5)
        assert get_rating(s, rita, rating.id).id == rating.id and get_rating(s, bea, rating.id).overall == 0.5
        with pytest.raises(LookupError, match="^no rating with id 4242$"):
            get_rating(s, rita, 4242)
        with pytest.raises(PermissionError, match="^ann may only read their own ratings$"):
            get_rating(s, ann, rating.id)


def test_transcreations_are_one_per_source_language_and_annotator(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, rita = (s.merge(accounts[n]) for n in ("ann", "bea", "rita"))
        for name in ("a", "b"):
            submit_rating(s, bea, study[name], 0.6)
        de = submit_transcreation(s, ann, study["a"], "de", "Bild a")
        fr = submit_transcreation(s, ann, study["a"], "fr", "image a")  # another language: another row
        other = submit_transcreation(s, ann, study["b"], "de", "Bild b")  # another source: another row
        assert len({de.id, fr.id, other.id}) == 3
        assert [t.text for t in s.scalars(select(Transcreation).order_by(Transcreation.id))] == ["Bild a", "image a", "Bild b"]
        parent = s.get(Caption, study["a"])
        perturbed = add_caption(s, rita, parent.image, "caption a a", kind="perturbed", parent=parent,
                                collection=_collection(s, accounts), perturbation={"op": "repetition"})
        submit_rating(s, bea, perturbed.id, 0.2)
        with pytest.raises(ValueError, match="is a perturbed caption; transcreate model candidates"):
            submit_transcreation(s, ann, perturbed.id, "de", "Bild a a")


def test_the_critical_queue_follows_each_annotators_order_and_offers_transcreations(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, col = s.merge(accounts["ann"]), s.merge(accounts["bea"]), _collection(s, accounts)
        submit_rating(s, bea, study["a"], 0.6)
        made = submit_transcreation(s, bea, study["a"], "de", "Bild a").result_caption_id
        skip_item(s, bea, study["b"])  # a rating skip does not hide b from bea's marking

        def queue(user):
            offered = []
            while (item := next_critical_item(s, user, col)) is not None:
                offered.append(item.id)
                skip_item(s, user, item.id, task="critical")
            return offered

        items = [study[n] for n in ("r2", "r1", "r-de", "a", "b", "c", "d")] + [made]
        first = queue(ann)
        assert sorted(first) == sorted(items)
        second = queue(bea)  # after ann's skips: each annotator's skips are their own
        assert sorted(second) == sorted(items)
        assert first != second and sorted(items) not in (first, second)  # each annotator's own order


def test_annotators_start_on_different_items_even_in_a_small_study():
    """queue_order's promise, on plain ids: ten annotators over ten captions do not all start on
    the same one, and each walks every caption once (an earlier multiplicative tie-break kept
    ids under about a hundred in id order for everyone)."""
    orders = [sorted(range(1, 11), key=lambda i, u=u: (queue_order(SimpleNamespace(id=u), i), i)) for u in range(1, 11)]
    assert all(sorted(order) == list(range(1, 11)) for order in orders)
    assert len({order[0] for order in orders}) >= 5
    assert len({tuple(order) for order in orders}) == 10
    big = 2**31 - 1  # the largest PostgreSQL integer id: the expression stays small
    assert 0 <= queue_order(SimpleNamespace(id=big), big) < 1009


def test_typed_phrases_match_in_any_case_and_a_blank_one_is_passed_over():
    marked = marked_phrases("a man in a White Shirt", ["", "white shirt", "  ", "MAN"])
    assert marked["critical_objects"] == ["white shirt", "MAN"]
    assert marked["spans"]["critical_objects"] == [[11, 22], [2, 5]]
    # no whole word matches: found anywhere, still in any case (as a phrase inside a Japanese run)
    assert marked_phrases("redWHITEblue", ["white"])["spans"]["critical_objects"] == [[3, 8]]


def test_the_rating_queue_prefers_ones_own_live_lease_and_no_one_elses(engine, accounts, study):
    """Written for the survivors of the 2026-11-27 mutation run in next_rating_item."""
    with session_scope(engine) as s:
        ann, bea, cal = (s.merge(accounts[n]) for n in ("ann", "bea", "cal"))
        col = _collection(s, accounts)
        held = next_rating_item(s, ann, col)
        for user in (bea, cal):  # two ratings: the held item is no longer among the least rated
            submit_rating(s, user, held.id, 0.5)
        assert next_rating_item(s, ann, col).id == held.id  # still ann's: her lease comes first
        others = [study[n] for n in ("a", "b", "c", "d") if study[n] != held.id]
        reserve_item(s, bea, others[0])  # bea's lease is not ann's
        submit_rating(s, ann, held.id, 0.5)
        mine = next_rating_item(s, ann, col)
        lease = s.scalar(select(RatingLease).where(RatingLease.annotator_id == ann.id))
        lease.expires_at = utcnow() - timedelta(seconds=5)  # ann's lease ran out
        s.flush()
        for user in (bea, cal):
            submit_rating(s, user, mine.id, 0.5)
        assert next_rating_item(s, ann, col).id != mine.id  # an expired lease is not held


def test_rating_skips_hide_each_skipped_item_and_only_from_the_rating_queue(engine, accounts, study):
    with session_scope(engine) as s:
        cal, col = s.merge(accounts["cal"]), _collection(s, accounts)
        skip_item(s, cal, study["c"], task="transcreation", language="de")  # another task's skip
        skip_item(s, cal, study["b"])
        skip_item(s, cal, study["d"])  # two rating skips by one annotator: both stored
        offered = []
        while (item := next_rating_item(s, cal, col)) is not None:
            offered.append(item.id)
            submit_rating(s, cal, item.id, 0.5)
        assert sorted(offered) == sorted([study["a"], study["c"]])


def test_progress_counts_only_the_collections_ratings(engine, accounts, study):
    with session_scope(engine) as s:
        ann, col = s.merge(accounts["ann"]), _collection(s, accounts)
        submit_rating(s, ann, study["a"], 0.5)
        submit_rating(s, ann, study["e"], 0.5)  # collection w
        progress = rating_progress(s, ann, col, k=1)
        assert (progress.done_by_user, progress.items, progress.items_complete) == (1, 4, 1)


def test_transcreation_queue_by_language_collection_and_annotator(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, cal, rita = (s.merge(accounts[n]) for n in ("ann", "bea", "cal", "rita"))
        col = _collection(s, accounts)
        for name in ("a", "b", "e"):
            submit_rating(s, bea, study[name], 0.6)
        offered = {next_transcreation_item(s, bea, col, "de").caption.id}
        submit_transcreation(s, ann, next(iter(offered)), "de", "Bild")  # done in German by someone
        rest = next_transcreation_item(s, bea, col, "de")
        assert rest is not None and rest.caption.id not in offered  # the other one is still offered
        skip_item(s, ann, rest.caption.id, task="transcreation", language="de")  # ann's skip is hers
        assert next_transcreation_item(s, bea, col, "de").caption.id == rest.caption.id
        skip_item(s, bea, rest.caption.id, task="transcreation", language="de")
        assert next_transcreation_item(s, bea, col, "de") is None  # e (collection w) is never offered for v
        skip_item(s, bea, study["a"], task="transcreation", language="fr")
        assert next_transcreation_item(s, bea, col, "fr").caption.id == study["b"]  # one skip hides one item
        parent = s.get(Caption, study["a"])
        modelled = add_caption(s, rita, parent.image, "caption m", source_model="model-m", collection=col)
        submit_rating(s, bea, modelled.id, 0.4)
        made = submit_transcreation(s, ann, modelled.id, "ja", "キャプション")
        assert made.result_caption.source_model == "model-m"


def test_a_rating_stores_every_aspect_and_ends_only_the_rated_items_lease(engine, accounts, study):
    with session_scope(engine) as s:
        ann, bea, cal = (s.merge(accounts[n]) for n in ("ann", "bea", "cal"))
        rating = submit_rating(s, ann, study["a"], 0.5, fluency=0.25, relevance=0.75, descriptiveness=1.0)
        s.refresh(rating)
        assert (rating.overall, rating.fluency, rating.relevance, rating.descriptiveness) == (0.5, 0.25, 0.75, 1.0)
        reserve_item(s, ann, study["b"])
        submit_rating(s, ann, study["c"], 0.5, k=3)  # rating another item keeps the lease on b
        submit_rating(s, ann, study["a"], 0.6)  # so does editing one
        assert s.scalars(select(RatingLease.caption_id).where(RatingLease.annotator_id == ann.id)).all() == [study["b"]]
        for user in (bea, cal):
            submit_rating(s, user, study["d"], 0.5)
        reserve_item(s, ann, study["b"])
        with pytest.raises(ValueError, match=r"^Caption \d+ already has its 2 ratings \(it was not reserved for you, or your reservation expired\); "
                                             r"nothing was saved\. Go on with the next item\.$"):
            submit_rating(s, ann, study["d"], 0.5, k=2)
        assert s.scalars(select(RatingLease.caption_id).where(RatingLease.annotator_id == ann.id)).all() == [study["b"]]
