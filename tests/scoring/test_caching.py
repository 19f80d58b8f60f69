"""Caching: an image already seen is not re-encoded; an edited caption encodes only itself."""
from __future__ import annotations

import io


from scoring.api import ScoreItem, Scorer


def _counting(module):
    counter = {"calls": 0, "rows": 0}

    def hook(mod, args, kwargs, output):
        batch = kwargs.get("pixel_values", kwargs.get("input_ids"))
        if batch is None:
            batch = args[0]
        counter["calls"] += 1
        counter["rows"] += batch.shape[0]

    handle = module.register_forward_hook(hook, with_kwargs=True)
    return counter, handle


def test_same_image_twice_runs_the_vision_tower_once(tiny_dir, make_image):
    scorer = Scorer("tiny", device="cpu")  # fresh caches
    clip = scorer.backbone("clip")
    vision, handle = _counting(clip.model.vision_model)
    try:
        image = make_image(42)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        as_bytes = buffer.getvalue()
        # CLIP-S, RefCLIP-S and MCS share the CLIP vision tower; the same picture appears
        # twice in one call (PIL) and again later (as PNG bytes: a different content hash).
        scorer.score([ScoreItem(image, "a dog", ["a dog"]), ScoreItem(image, "a cat", ["a cat"])],
                     ["CLIP-S", "RefCLIP-S", "MCS"])
        assert vision == {"calls": 1, "rows": 1}
        scorer.score([ScoreItem(image, "a red car")], ["CLIP-S", "MCS"])
        assert vision == {"calls": 1, "rows": 1}
        scorer.score([ScoreItem(as_bytes, "a dog")], ["CLIP-S"])
        scorer.score([ScoreItem(as_bytes, "another dog")], ["CLIP-S"])
        assert vision == {"calls": 2, "rows": 2}
    finally:
        handle.remove()


def test_editing_one_caption_encodes_only_that_caption(tiny_dir, make_image):
    scorer = Scorer("tiny", device="cpu")
    text, handle = _counting(scorer.backbone("clip").model.text_model)
    images = [make_image(i) for i in range(4)]
    captions = ["a dog on the grass", "two red cars", "a small white cat", "a blue boat"]
    try:
        first = scorer.score([ScoreItem(im, c) for im, c in zip(images, captions)], ["CLIP-S"])["CLIP-S"]
        assert text["rows"] == 4
        edited = list(captions)
        edited[2] = "a small black cat"
        second = scorer.score([ScoreItem(im, c) for im, c in zip(images, edited)], ["CLIP-S"])["CLIP-S"]
        assert text["rows"] == 5 and text["calls"] == 2
        assert second.values[:2] == first.values[:2] and second.values[3] == first.values[3]
    finally:
        handle.remove()


def test_itm_pairs_and_vision_states_are_cached(tiny_dir, make_image):
    scorer = Scorer("tiny", device="cpu")
    itm = scorer.backbone("blip-itm")
    vision, h1 = _counting(itm.model.vision_model)
    try:
        image = make_image(7)
        scorer.score([ScoreItem(image, "a dog")], ["UMIC-C"])
        scorer.score([ScoreItem(image, "a dog"), ScoreItem(image, "a cat")], ["UMIC-C"])
        assert vision["rows"] == 1
    finally:
        h1.remove()


def test_backbones_load_once_and_are_shared(tiny_scorer):
    assert tiny_scorer.backbone("clip") is tiny_scorer.backbone("clip")
    spec = tiny_scorer.registry.metrics["MCS"]
    assert spec.vision_backbone == "clip"


def test_lru_get_many_reads_and_refreshes_like_get():
    from scoring.cache import LRUCache

    cache = LRUCache(3)
    for key in "abc":
        cache.put(key, key.upper())
    assert cache.get_many(["c", "x", "a", "a"]) == ["C", None, "A", "A"]
    assert (cache.hits, cache.misses) == (3, 1)
    cache.put("d", "D")  # "b" was used least recently: a and c were refreshed by get_many
    assert cache.get_many(["b", "a", "c", "d"]) == [None, "A", "C", "D"]
