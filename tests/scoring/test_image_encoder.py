"""The streaming image pass: passes ramp up from a quarter of full size, several batches are
prepared at once, and every key still gets its own image's embedding, in order."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from PIL import Image

from scoring.api import Scorer
from scoring.images import image_key
from scoring.pixels import ImageEncoder, ImagePipeline, encode_images


@pytest.fixture(scope="module")
def clip(tiny_dir):
    return Scorer("tiny", device="cpu").backbone("clip")


def _pictures(count: int) -> list[Image.Image]:
    return [Image.new("RGB", (24 + i % 7, 20 + i % 5), (i * 37 % 256, i * 91 % 256, i * 13 % 256)) for i in range(count)]


def test_passes_ramp_up_two_are_prepared_at_once_and_rows_follow_their_keys(clip, monkeypatch):
    monkeypatch.setenv("CAPLENS_IMAGE_BATCH", "128")
    pictures = _pictures(300)
    keys = [image_key(p) for p in pictures]
    serial = encode_images([clip], keys, dict(zip(keys, pictures)))[0].numpy()  # the caller's pipeline, one pass at a time

    pipeline = ImagePipeline("cpu", mode=clip.pipeline.mode, prepare_depth=2)
    monkeypatch.setattr(clip, "pipeline", pipeline)
    passes, running, most = [], [0], [0]
    lock = threading.Lock()
    encode, prepare = clip.encode_pixels, ImageEncoder._prepare

    def counting_prepare(self, batch):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)  # long enough for the next batch's preparation to start beside it
        try:
            return prepare(self, batch)
        finally:
            with lock:
                running[0] -= 1

    submitted, submitted_at_first_pass = [], []
    ahead = pipeline.prepare_ahead
    monkeypatch.setattr(pipeline, "prepare_ahead", lambda prep, batch: submitted.append(len(batch)) or ahead(prep, batch))

    def counting_encode(pixels):
        if not passes:
            submitted_at_first_pass.extend(submitted)
        passes.append(pixels.shape[0])
        return encode(pixels)

    monkeypatch.setattr(ImageEncoder, "_prepare", counting_prepare)
    monkeypatch.setattr(clip, "encode_pixels", counting_encode)
    encoder = ImageEncoder([clip])
    for start in range(0, 300, 25):  # files arrive in read tasks of 25
        encoder.add([(k, p) for k, p in zip(keys[start : start + 25], pictures[start : start + 25])])
    (rows,) = encoder.finish()
    assert passes == [32, 64, 128, 76]  # a quarter, doubling to full size, then the rest
    assert most[0] == 2 and submitted_at_first_pass == [32, 64, 128]  # two in preparation while the towers run
    assert encoder.keys == keys
    assert np.abs(rows.numpy() - serial).max() < 1e-5
    assert np.abs(serial[0] - serial[1]).max() > 1e-3  # the images' embeddings do differ


def test_small_pools_and_one_thread_do_not_ramp(clip, monkeypatch):
    monkeypatch.setenv("CAPLENS_IMAGE_BATCH", "64")
    pictures = _pictures(100)
    keys = [image_key(p) for p in pictures]
    passes = []
    encode = clip.encode_pixels
    monkeypatch.setattr(clip, "encode_pixels", lambda pixels: passes.append(pixels.shape[0]) or encode(pixels))
    encoder = ImageEncoder([clip])
    encoder.add(list(zip(keys, pictures)))
    encoder.finish()
    assert passes == [64, 36]  # under 128 images a pass, no quarter-size first pass
