"""Batching machinery: out-of-memory halving, per-backbone precision, captions tokenised
once and batched across metrics, the bench profile's sizes, stage timing."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from scoring import stages
from scoring.api import ScoreItem, Scorer
from scoring.backbones import Placement, placement_for
from scoring.batching import map_halving
from scoring.registry import RegistryError, load_registry


def fails_above(limit: int, calls: list):
    """A batch function that runs out of device memory for batches larger than ``limit``."""

    def run(chunk):
        calls.append(len(chunk))
        if len(chunk) > limit:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [2 * x for x in chunk]

    return run


def test_out_of_memory_halves_the_batch_and_continues():
    calls: list[int] = []
    outputs, size = map_halving(fails_above(3, calls), list(range(10)), 8)
    assert [x for batch in outputs for x in batch] == [2 * x for x in range(10)]
    assert size == 2 and calls == [8, 4, 2, 2, 2, 2, 2]


def test_other_errors_and_single_item_oom_are_raised():
    with pytest.raises(ValueError):
        map_halving(lambda chunk: (_ for _ in ()).throw(ValueError("bad")), [1, 2], 2)
    with pytest.raises(torch.OutOfMemoryError):
        map_halving(fails_above(0, []), [1, 2, 3], 4)


def test_text_encoding_survives_out_of_memory(tiny_dir):
    """A text tower that runs out of memory on big batches gives the same embeddings."""
    texts = [f"a dog number {i} on the grass" for i in range(9)]
    expected = Scorer("tiny", device="cpu").text_embeddings(texts)
    scorer = Scorer("tiny", device="cpu")
    clip = scorer.backbone("clip")
    encode, calls = clip._encode_text_batch, []

    def limited(batch):
        calls.append(len(batch))
        if len(batch) > 4:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return encode(batch)

    clip._encode_text_batch = limited
    np.testing.assert_allclose(scorer.text_embeddings(texts), expected, atol=1e-6)
    assert clip.text_batch_size == 4 and calls[0] == 9 and max(calls[1:]) == 4


def test_precision_per_backbone(monkeypatch):
    cuda = Placement(torch.device("cuda"), torch.bfloat16)
    registry = load_registry("tiny")
    assert placement_for(registry.backbones["clip"], cuda).dtype == torch.float16  # measured default
    assert placement_for(registry.backbones["blip-itm"], cuda).dtype == torch.float16
    cpu = Placement(torch.device("cpu"), torch.float32)
    assert placement_for(registry.backbones["clip"], cpu) == cpu
    monkeypatch.setenv("CAPLENS_REGISTRY_CLIP_PRECISION", "fp32")
    assert placement_for(load_registry("tiny").backbones["clip"], cuda).dtype == torch.float32
    monkeypatch.setenv("CAPLENS_REGISTRY_CLIP_PRECISION", "fp8")
    with pytest.raises(RegistryError, match="precision"):
        load_registry("tiny")


def test_each_caption_is_tokenised_once_and_texts_batched_across_metrics(tiny_dir, images, monkeypatch):
    from scoring.backbones import text

    text.TOKEN_CACHE.clear()
    scorer = Scorer("tiny", device="cpu")
    tokenised: list[str] = []
    batches: dict[str, int] = {}
    encode_ids = text.encode_ids
    monkeypatch.setattr(text, "encode_ids", lambda tokenizer, texts: tokenised.extend(texts) or encode_ids(tokenizer, texts))
    for name in ("clip", "pacs", "specs"):
        backbone = scorer.backbone(name)
        encode = backbone._encode_text_batch

        def count_batches(batch, name=name, encode=encode):
            batches[name] = batches.get(name, 0) + 1
            return encode(batch)

        backbone._encode_text_batch = count_batches
    items = [ScoreItem(im, f"a dog number {i}", ["a dog", "a brown dog"]) for i, im in enumerate(images[:3])]
    results = scorer.score(items, ["CLIP-S", "RefCLIP-S", "PAC-S", "RefPAC-S", "SPECS"])
    assert all(r.available and None not in r.values for r in results.values())
    assert len(tokenised) == len(set(tokenised))  # CLIP, PAC-S and SPECS share one tokenizer
    prefixed = {f"A photo depicts a dog number {i}" for i in range(3)} | {"A photo depicts a dog", "A photo depicts a brown dog"}
    assert set(tokenised) == prefixed | {f"a dog number {i}" for i in range(3)}
    # CLIP-S and RefCLIP-S texts (candidates and references) go through the tower together.
    assert batches == {"clip": 1, "pacs": 1, "specs": 1}


def test_bench_profile_has_hub_sizes():
    """Built on the meta device: shapes and parameter counts without any weights."""
    from transformers import BlipForImageTextRetrieval, CLIPModel, DistilBertModel

    from scoring import bench

    def parameters(model_class, config) -> int:
        with torch.device("meta"):
            return sum(p.numel() for p in model_class(config).parameters())

    clip = bench.clip_config()
    assert (clip.vision_config.hidden_size, clip.vision_config.patch_size, clip.vision_config.image_size) == (768, 32, 224)
    assert (clip.text_config.hidden_size, clip.text_config.max_position_embeddings, clip.projection_dim) == (512, 77, 512)
    assert 150e6 < parameters(CLIPModel, clip) < 153e6  # ViT-B/32 CLIP: 151.3 M
    assert bench.clip_config(248).text_config.max_position_embeddings == 248
    student = bench.text_student_config()
    assert (student.dim, student.n_layers, student.vocab_size) == (768, 6, 119547)
    assert 134e6 < parameters(DistilBertModel, student) < 136e6  # multilingual DistilBERT: 134.7 M
    itm = bench.itm_config()
    assert (itm.vision_config.image_size, itm.vision_config.patch_size, itm.text_config.num_hidden_layers) == (384, 16, 12)
    assert 220e6 < parameters(BlipForImageTextRetrieval, itm) < 230e6
    registry = load_registry("bench")
    assert list(registry.metrics) == list(load_registry("hub").metrics)
    assert registry.backbones["specs"].path.name == "specs" and registry.backbones["umic-itm"].kind == "blip-itm"


def test_stage_times_are_recorded(tiny_dir, images):
    scorer = Scorer("tiny", device="cpu")
    with stages.recording(sync=True) as times:
        scorer.score([ScoreItem(images[0], "a dog"), ScoreItem(images[1], "a cat")], ["CLIP-S", "UMIC-C"])
    assert all(times[name] > 0 for name in ("read", "decode", "preprocess", "vision", "text", "similarity"))
    with stages.stage("vision"):
        pass  # outside recording: no effect, no error


def test_images_are_encoded_while_later_files_are_still_being_read(tiny_dir, make_image, tmp_path, monkeypatch):
    """The first batch reaches the image tower before the last file is read, every image is
    encoded once, and the scores equal a run that reads everything first."""
    import threading
    import time

    from scoring import pixels

    paths = []
    for index in range(8):
        paths.append(tmp_path / f"image-{index}.png")
        make_image(index, (40, 30)).save(paths[-1])
    items = [ScoreItem(path, f"caption {i}") for i, path in enumerate(paths)] + [ScoreItem(paths[0], "again")]
    events, lock = [], threading.Lock()
    slow_read = pixels._read_keyed_all

    def read(chunk):
        time.sleep(0.05)
        out = slow_read(chunk)
        with lock:
            events.append("read")
        return out

    monkeypatch.setattr(pixels, "READ_TASK_FILES", 1)
    monkeypatch.setattr(pixels, "_read_keyed_all", read)
    monkeypatch.setattr(pixels.ImagePipeline, "chunk_size", lambda self, towers: 2)
    streamed = Scorer("tiny", device="cpu")
    tower = streamed.backbone("clip")
    encode = tower.encode_pixels

    def encode_pixels(batch):
        with lock:
            events.append(("encode", batch.shape[0]))
        return encode(batch)

    monkeypatch.setattr(tower, "encode_pixels", encode_pixels)
    streamed.score(items, ["CLIP-S"])
    encodes = [e for e in events if e != "read"]
    assert events.index(encodes[0]) < len(events) - 1 - events[::-1].index("read")  # before the last read
    assert sum(n for _, n in encodes) == 8 and events.count("read") == 8  # each distinct image once

    serial = Scorer("tiny", device="cpu")
    with stages.recording(sync=True):  # serial: every file read before any is decoded
        serial.score(items, ["CLIP-S"])
    got, expected = (scorer.backbone("clip").image_embeddings(paths) for scorer in (streamed, serial))  # cached rows
    assert len(encodes) == 4  # nothing encoded again by image_embeddings
    assert np.abs(got - expected).max() < 1e-6 and np.abs(got[0] - got[1]).max() > 1e-3

    events.clear()  # one thread: nothing runs beside the caller, so every file is read first
    before = torch.get_num_threads()
    try:
        single = Scorer("tiny", device="cpu", threads=1)
        monkeypatch.setattr(single.backbone("clip"), "encode_pixels", encode_pixels)
        single.score(items, ["CLIP-S"])
    finally:
        torch.set_num_threads(before)
    assert events[:8] == ["read"] * 8 and len(events) == 12
