"""The named endpoints through gradio_client against a live local server (tiny profile)."""
from __future__ import annotations

from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from PIL import Image


@pytest.fixture(scope="module")
def client(server):
    return Client(server.url, verbose=False)


def test_api_lists_the_named_endpoints(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/score", "/perturb", "/login", "/next_item", "/rate", "/next_pair", "/judge_pair", "/analyze",
            "/failure_cases"} <= names


def test_score_returns_every_metric_and_matches_the_library(server, client, image_file):
    from scoring.api import ScoreItem, get_scorer

    captions = ["a red square", "a blue circle on the grass"]
    refs = ["a red square on white", "a square that is red"]
    result = client.predict(handle_file(str(image_file)), "\n".join(captions), "\n".join(refs), "en", "",
                            api_name="/score")
    scorer = get_scorer(server.ctx.profile)
    names = scorer.metric_names()
    assert set(result["metrics"]) == set(names)
    assert [row["caption"] for row in result["rows"]] == captions
    for name, info in result["metrics"].items():
        assert info["status"] == "available" or info["status"].startswith(("unavailable: ", "available (needs",
                                                                            "available; "))
    if result["metrics"]["CIDEr"]["status"].startswith("available"):  # one image: the IDF is 0 and says so
        assert "not meaningful: document frequencies from the references of one image" in result["metrics"]["CIDEr"]["status"]
    # Same numbers as calling the library directly on the same inputs.
    image = Image.open(image_file).convert("RGB")
    direct = scorer.score([ScoreItem(image=image, candidate=c, references=refs, lang="en") for c in captions])
    checked = 0
    for name in names:
        if direct[name].unavailable:
            assert result["metrics"][name]["status"].startswith("unavailable: ")
            continue
        for row, value in zip(result["rows"], direct[name].values):
            if value is None:
                assert row[name] is None
            else:
                assert row[name] == pytest.approx(value, abs=1e-4)
                checked += 1
    assert checked >= 4  # at least CLIP-S and BLEU-1 for both captions ran for real


def test_score_metric_selection_and_unknown_metric(client, image_file):
    result = client.predict(handle_file(str(image_file)), "a red square", "", "en", "clip-s", api_name="/score")
    assert list(result["metrics"]) == ["CLIP-S"]
    assert 0.0 <= result["rows"][0]["CLIP-S"] <= 2.5
    with pytest.raises(AppError, match=r"^unknown metric 'NOPE' in profile 'tiny'; known: CLIP-S, "):
        client.predict(handle_file(str(image_file)), "a red square", "", "en", "NOPE", api_name="/score")
    with pytest.raises(AppError, match=r"^unknown language code 'xx': give a two-letter ISO 639-1 code \(en, de, "):
        client.predict(handle_file(str(image_file)), "a red square", "", "xx", "CLIP-S", api_name="/score")
    upper = client.predict(handle_file(str(image_file)), "a red square", "", "EN", "CLIP-S", api_name="/score")
    assert upper["rows"][0]["lang"] == "en" and upper["rows"][0]["CLIP-S"] == result["rows"][0]["CLIP-S"]


def test_resending_with_one_edited_caption_scores_only_that_one(server, image_file):
    client = Client(server.url, verbose=False)  # its own session, so its own memory of scored pairs
    captions = ["a red square", "a dog", "two cats", "a red car", "a horse"]
    first = client.predict(handle_file(str(image_file)), "\n".join(captions), "", "en", "CLIP-S,BLEU-1",
                           api_name="/score")
    assert first["computed_now"] == 5
    captions[2] = "two small cats"
    second = client.predict(handle_file(str(image_file)), "\n".join(captions), "", "en", "CLIP-S,BLEU-1",
                            api_name="/score")
    assert second["computed_now"] == 1
    assert [r["CLIP-S"] for i, r in enumerate(second["rows"]) if i != 2] == \
        [r["CLIP-S"] for i, r in enumerate(first["rows"]) if i != 2]


def test_bad_upload_gives_a_clear_error_and_the_server_stays_up(client, tmp_path, image_file):
    bad = tmp_path / "notes.png"
    bad.write_bytes(b"definitely not a PNG")
    with pytest.raises(AppError, match=r"^notes\.png: not an image \(or a format Pillow cannot read\)\.$"):
        client.predict(handle_file(str(bad)), "a red square", "", "en", "CLIP-S", api_name="/score")
    ok = client.predict(handle_file(str(image_file)), "a red square", "", "en", "CLIP-S", api_name="/score")
    assert ok["rows"][0]["CLIP-S"] is not None


def test_decompression_bomb_and_truncated_uploads_are_refused(client, tmp_path, image_file):
    import struct
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))
    with pytest.raises(AppError, match=r"^bomb\.png: image dimensions are too large to decode safely\.$"):
        client.predict(handle_file(str(bomb)), "a red square", "", "en", "CLIP-S", api_name="/score")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(image_file.read_bytes()[:60])
    with pytest.raises(AppError, match=r"^cut\.png: the image is damaged or truncated \("):
        client.predict(handle_file(str(truncated)), "a red square", "", "en", "CLIP-S", api_name="/score")
    assert client.predict(handle_file(str(image_file)), "a red square", "", "en", "CLIP-S",
                          api_name="/score")["rows"][0]["CLIP-S"] is not None


def test_models_stay_loaded_between_requests(client, image_file, monkeypatch):
    import scoring.api

    loads = []
    real = scoring.api.load_backbone
    monkeypatch.setattr(scoring.api, "load_backbone", lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    client.predict(handle_file(str(image_file)), "a cat on a mat", "a cat", "en", "", api_name="/score")
    first = len(loads)
    client.predict(handle_file(str(image_file)), "a dog on a rug", "a dog", "en", "", api_name="/score")
    assert len(loads) == first  # the second request loaded nothing


def test_perturb_all_five_with_spans(client):
    from scoring.perturb.ops import PRMCS_OPS, perturb

    text = "a man in a white shirt rides a brown horse on the beach"
    results = client.predict(text, "all", 0.4, 3, "en", "", api_name="/perturb")
    assert [r["op"] for r in results] == list(PRMCS_OPS)
    for r in results:
        expected = perturb(text, r["op"], p=0.4, seed=3, lang="en").to_dict()
        assert r["text"] == expected["text"]
        assert [list(s) for s in r["changed_spans"]] == [list(s) for s in expected["changed_spans"]]
        for start, end in r["changed_spans"]:
            assert 0 <= start <= end <= len(r["text"])  # zero width: words removed here


def test_perturb_takes_each_operations_default_p_from_the_library(client):
    from scoring.perturb.ops import DEFAULT_P

    text = "a man in a white shirt rides a brown horse on the beach"
    results = client.predict(text, "all", None, 3, "en", "", api_name="/perturb")
    assert {r["op"]: r["p"] for r in results} == {
        "repetition": 0.4, "removal": 0.6, "masking": 0.4, "jumble": None, "substitution": None}
    assert results[1]["p"] == DEFAULT_P["removal"]
    # Omitted arguments take the endpoint's defaults: all five, paper p, seed 0.
    assert [r["p"] for r in client.predict(text, api_name="/perturb")] == [r["p"] for r in results]
    (alias,) = client.predict(text, "permutation", None, 3, "en", "", api_name="/perturb")
    assert alias["op"] == "jumble" and alias["text"] == results[3]["text"]


def test_perturb_rejects_empty_text(client):
    with pytest.raises(AppError, match=r"^Enter a caption to perturb\.$"):
        client.predict("   ", "masking", 0.4, 0, "en", "", api_name="/perturb")


def _picture(uri: str) -> tuple:
    """(size, the colour of its middle pixel, rounded to tens) of a JPEG data URI."""
    import base64
    import io

    from PIL import Image as PILImage

    assert uri.startswith("data:image/jpeg;base64,")
    with PILImage.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as img:
        pixel = img.convert("RGB").getpixel((img.width // 2, img.height // 2))
        return img.size, tuple(10 * round(c / 10) for c in pixel)


def _picture_of_caption(caption_id: int) -> tuple:
    """The same, of the stored image of a caption, as `picture_data_uri` would give it."""
    from annotation.database import database_session
    from annotation.image_store import image_path, picture_data_uri
    from db.models import Caption

    with database_session() as session:
        return _picture(picture_data_uri(image_path(session.get(Caption, caption_id).image)))


def test_rate_requires_login_then_stores_the_rating(server):
    from annotation.people.accounts import get_user
    from annotation.database import database_session
    from annotation.studies.tasks import list_ratings

    from app.session import TOKEN_HEADER

    anonymous = Client(server.url, verbose=False)
    caption_id = server.caption_ids["a green field"]
    with pytest.raises(AppError, match=r"^Not logged in: call the login tool \(over MCP\) or the /login endpoint"):
        anonymous.predict(caption_id, 0.7, None, None, None, api_name="/rate")
    with pytest.raises(AppError, match=r"^Wrong user name or password\.$"):
        anonymous.predict(server.annotator[0], "wrong-password", api_name="/login")
    who = anonymous.predict(*server.annotator, api_name="/login")
    assert who["user"] == server.annotator[0] and who["role"] == "annotator" and len(who["token"]) >= 40
    with pytest.raises(AppError, match=r"X-CapLens-Token header"):  # the token logs in, not the Gradio session that got it
        anonymous.predict(server.collection, api_name="/next_item")
    client = Client(server.url, verbose=False, headers={TOKEN_HEADER: who["token"]})
    item = client.predict(server.collection, api_name="/next_item")
    assert isinstance(item["caption_id"], int) and item["text"] and "rated" in item["progress"]
    assert item["notice"] == ""  # no quality control in this collection
    # the picture the caption is rated by, since an API or MCP caller cannot read the server's files
    assert _picture(item["image"]) == _picture_of_caption(item["caption_id"])
    assert isinstance(item["references"], list)
    stored = client.predict(caption_id, 0.7, 0.9, None, 0.4, api_name="/rate")
    assert stored["overall"] == pytest.approx(0.7) and stored["annotator"] == server.annotator[0]
    with database_session() as session:
        user = get_user(session, server.annotator[0])
        mine = {r.caption_id: r for r in list_ratings(session, user, annotator=user)}
        assert mine[caption_id].overall == pytest.approx(0.7)
        assert mine[caption_id].fluency == pytest.approx(0.9)
        assert mine[caption_id].relevance is None
    with pytest.raises(AppError, match=r"^overall must be between 0 and 1, got 1\.5$"):
        client.predict(caption_id, 1.5, None, None, None, api_name="/rate")


def test_pairs_are_judged_over_the_api_in_the_annotators_blind_order(server):
    """next_pair shows the two captions in this annotator's fixed left/right order, judge_pair
    stores "left" as the caption that was on the left, and answers with the next pair."""
    from sqlalchemy import select

    from annotation.studies import pairwise
    from annotation.people.accounts import get_user
    from annotation.captions import add_caption, get_or_create_collection
    from annotation.database import database_session
    from annotation.image_store import add_image
    from db.models import PairwiseItem, PairwiseJudgment
    from tests.app.conftest import png_bytes

    from app.session import TOKEN_HEADER

    with database_session() as session:
        researcher = get_user(session, server.researcher[0])
        collection = get_or_create_collection(session, researcher, "zz-api-pairs")
        image = add_image(session, png_bytes((90, 90, 10)), original_filename="duel.png")
        texts = {add_caption(session, researcher, image, text, source_model=model, collection=collection).id: text
                 for text, model in (("a yellow square", "m1"), ("a blue circle", "m2"))}
        assert pairwise.make_pairs(session, researcher, collection) == 1
        item = session.scalar(select(PairwiseItem).where(PairwiseItem.collection_id == collection.id))
        pair_id, a_text, b_text = item.id, texts[item.caption_a_id], texts[item.caption_b_id]
    with pytest.raises(AppError, match=r"^Not logged in"):
        Client(server.url, verbose=False).predict("zz-api-pairs", api_name="/next_pair")
    token = Client(server.url, verbose=False).predict(*server.annotator, api_name="/login")["token"]
    client = Client(server.url, verbose=False, headers={TOKEN_HEADER: token})
    shown = client.predict("zz-api-pairs", api_name="/next_pair")
    with database_session() as session:
        annotator = get_user(session, server.annotator[0])
        a_left = pairwise.a_on_left(annotator.id, pair_id)
    assert (shown["pair_id"], shown["left"], shown["right"]) == \
        (pair_id, *((a_text, b_text) if a_left else (b_text, a_text)))
    assert _picture(shown["image"]) == ((48, 40), (90, 90, 10))  # png_bytes' size, its colour
    with pytest.raises(AppError, match=r"^choose left, right or tie, not 'both'$"):
        client.predict("zz-api-pairs", pair_id, "both", api_name="/judge_pair")
    after = client.predict("zz-api-pairs", pair_id, "left", api_name="/judge_pair")
    assert after["pair_id"] is None and after["message"].startswith(f"Saved your choice on pair {pair_id}.")
    assert "Nothing left to compare" in after["message"]
    with database_session() as session:
        judgment = session.scalar(select(PairwiseJudgment).where(PairwiseJudgment.item_id == pair_id))
        assert judgment.choice == ("a" if a_left else "b")


def test_fifteen_sends_of_a_large_image_keep_one_copy(server, client, tmp_path):
    """The issue's case: a small PNG of 6000 x 6000 pixels scored 15 times. Gradio keeps one
    copy of the upload (named by content), nothing lands in the data directory, and nothing
    bigger than the upload is written anywhere the server writes."""
    import io

    from gradio.utils import get_upload_folder
    from PIL import Image as PILImage

    from scoring.paths import data_dir

    buffer = io.BytesIO()
    PILImage.new("RGB", (6000, 6000), (17, 151, 203)).save(buffer, "PNG", optimize=True)
    data = buffer.getvalue()
    path = tmp_path / "large.png"
    path.write_bytes(data)

    def sizes(root) -> dict:
        return {p: p.stat().st_size for p in Path(root).rglob("*") if p.is_file()}

    roots = [Path(get_upload_folder()), data_dir()]
    before = [sizes(root) for root in roots]
    for _ in range(15):
        result = client.predict(handle_file(str(path)), "a blue square", "", "en", "BLEU-1", api_name="/score")
        assert result["rows"][0]["image"] == "large.png"
    after = [sizes(root) for root in roots]
    cache_new = {p: n for p, n in after[0].items() if before[0].get(p) != n}
    assert sum(cache_new.values()) <= len(data) + 64 * 1024  # at most one new copy (+ empty temp files)
    copies = [p for p, n in after[0].items() if n == len(data) and p.read_bytes() == data]
    assert len(copies) == 1 and copies[0].name == "large.png"
    # ... which the server's cache sweep knows about and will remove.
    from app.ui import CACHE_SWEEP

    assert server.demo.delete_cache == CACHE_SWEEP
    assert str(copies[0]) in {f for files in server.demo.temp_file_sets for f in files}
    grown = {p: n for p, n in after[1].items() if before[1].get(p) != n}
    assert sum(grown.values()) < 1 << 20, grown  # the database may log a little; no images
