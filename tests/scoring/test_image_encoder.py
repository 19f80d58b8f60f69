"""The streaming image pass: files arrive in read tasks, full passes go to the towers as they
fill, and every key gets its own image's embedding, in order."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from scoring.api import Scorer
from scoring.images import image_key
from scoring.pixels import ImageEncoder, encode_images


@pytest.fixture(scope="module")
def clip(tiny_dir):
    return Scorer("tiny", device="cpu").backbone("clip")


def _pictures(count: int) -> list[Image.Image]:
    return [Image.new("RGB", (24 + i % 7, 20 + i % 5), (i * 37 % 256, i * 91 % 256, i * 13 % 256)) for i in range(count)]


def test_streamed_passes_fill_as_files_arrive_and_rows_follow_their_keys(clip, monkeypatch):
    monkeypatch.setenv("CAPLENS_IMAGE_BATCH", "128")
    pictures = _pictures(300)
    keys = [image_key(p) for p in pictures]
    whole = encode_images([clip], keys, dict(zip(keys, pictures)))[0].numpy()  # every image added at once
    passes, arrived, arrived_at_pass = [], [0], []
    encode = clip.encode_pixels

    def counting_encode(pixels):
        passes.append(pixels.shape[0])
        arrived_at_pass.append(arrived[0])
        return encode(pixels)

    monkeypatch.setattr(clip, "encode_pixels", counting_encode)
    encoder = ImageEncoder([clip])
    for start in range(0, 300, 25):  # files arrive in read tasks of 25
        arrived[0] = start + 25
        encoder.add([(k, p) for k, p in zip(keys[start : start + 25], pictures[start : start + 25])])
    (rows,) = encoder.finish()
    assert passes == [128, 128, 44]
    assert arrived_at_pass[0] < 300  # the first pass ran while files were still arriving
    assert encoder.keys == keys
    assert np.abs(rows.numpy() - whole).max() < 1e-5
    assert np.abs(whole[0] - whole[1]).max() > 1e-3  # the images' embeddings do differ


def test_a_key_the_towers_have_cached_is_not_encoded_again(clip, monkeypatch):
    pictures = _pictures(10)
    keys = [image_key(p) for p in pictures]
    clip.image_cache.clear()
    clip.image_embeddings(pictures[:4], keys[:4])
    passes = []
    encode = clip.encode_pixels
    monkeypatch.setattr(clip, "encode_pixels", lambda pixels: passes.append(pixels.shape[0]) or encode(pixels))
    encoder = ImageEncoder([clip])
    encoder.add(list(zip(keys, pictures)) + [(keys[5], pictures[5])])  # a key twice in one request
    encoder.finish()
    assert passes == [6] and encoder.keys == keys[4:]
