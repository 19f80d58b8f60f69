"""Small batches padded to graph buckets score what unpadded batches score, and the towers'
forwards never wait for the device (what CUDA graph capture requires), checked on the CPU.

On CUDA small batches are padded to bucket shapes and replayed from captured graphs
(scoring/backbones/graphs.py); tests/scoring/test_gpu.py checks the replay itself."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils._python_dispatch import TorchDispatchMode

from scoring.api import ScoreItem, Scorer
from scoring.backbones import graphs, inference
from scoring.backbones.text import tokenize_truncating

TEXTS = ["a dog", "a small brown dog running on the green grass near a tree", "two cats", "a red car parked",
         "ein Hund im Park"]


class NoHostSync(TorchDispatchMode):
    """Fails on any operation that hands a tensor's value to Python, which on CUDA waits
    for the GPU and is refused while a graph is being captured."""

    SYNCING = {"_local_scalar_dense", "is_nonzero", "nonzero", "item", "masked_select", "unique", "_unique2"}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if name in self.SYNCING:
            raise AssertionError(f"{name} waits for the device")
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def scorer(tiny_dir):
    return Scorer("tiny", device="cpu")


@pytest.fixture(autouse=True)
def _own_pending_shapes(monkeypatch):
    """Shapes other tests' towers left waiting for capture (on CUDA) are not this test's."""
    monkeypatch.setattr(graphs, "_pending", set())


def _padded(monkeypatch, on: bool):
    monkeypatch.setattr(graphs, "PAD_ON_CPU", on)


def test_buckets():
    assert [graphs.batch_bucket(n) for n in (1, 2, 3, 5, 8, 9, 16, 17)] == [1, 2, 4, 8, 8, 16, 16, None]
    assert [graphs.length_bucket(n, 77) for n in (1, 8, 9, 70, 73, 77)] == [8, 8, 16, 72, 77, 77]


@pytest.mark.parametrize("backbone", ["clip", "specs", "mclip-text"])
def test_padded_text_batches_give_the_unpadded_embeddings(scorer, backbone, monkeypatch):
    tower = scorer.backbone(backbone)
    _padded(monkeypatch, False)
    plain = tower._encode_text_batch(TEXTS)[0].numpy()
    alone = np.concatenate([tower._encode_text_batch([t])[0].numpy() for t in TEXTS])
    _padded(monkeypatch, True)
    padded = tower._encode_text_batch(TEXTS)[0].numpy()
    assert padded.shape == plain.shape == (len(TEXTS), tower.embedding_dim)
    assert np.abs(padded - plain).max() < 1e-5
    assert np.abs(alone - plain).max() < 1e-5  # padding to the longest text changes nothing either
    assert np.abs(plain[0] - plain[1]).max() > 1e-3  # the texts' embeddings do differ


def test_padded_image_batches_give_the_unpadded_embeddings(scorer, monkeypatch):
    tower = scorer.backbone("clip")
    pixels = torch.randn(3, 3, *tower.preprocess.crop)
    _padded(monkeypatch, False)
    plain = tower.encode_pixels(pixels).numpy()
    _padded(monkeypatch, True)
    padded = tower.encode_pixels(pixels).numpy()
    assert padded.shape == plain.shape == (3, tower.embedding_dim)
    assert np.abs(padded - plain).max() < 1e-5


def test_padded_cross_encoder_batches_give_the_unpadded_probabilities(scorer, monkeypatch):
    tower = scorer.backbone("blip-itm")
    pictures = [Image.new("RGB", (40, 30), colour) for colour in ((200, 20, 20), (20, 200, 20), (20, 20, 200))]
    texts = TEXTS[:3]
    keys = ["red", "green", "blue"]
    _padded(monkeypatch, False)
    plain = np.stack([tower.match_probability(pictures, texts, keys, head)[0] for head in ("pair", "one-logit")])
    tower.pair_cache.clear()
    tower.vision_cache.clear()
    _padded(monkeypatch, True)
    padded = np.stack([tower.match_probability(pictures, texts, keys, head)[0] for head in ("pair", "one-logit")])
    assert np.abs(padded - plain).max() < 1e-5
    assert np.ptp(plain[0]) > 1e-4  # the pairs' probabilities do differ


def test_one_cross_encoder_pass_serves_both_heads(scorer, monkeypatch):
    tower = scorer.backbone("blip-itm")
    tower.pair_cache.clear()
    calls = []
    original = tower._cls_chunk
    monkeypatch.setattr(tower, "_cls_chunk", lambda pairs: calls.append(len(pairs)) or original(pairs))
    picture = Image.new("RGB", (40, 30), (90, 90, 20))
    pair = tower.match_probability([picture], ["a yellow field"], ["yellow"], "pair")[0]
    one = tower.match_probability([picture], ["a yellow field"], ["yellow"], "one-logit")[0]
    assert calls == [1] and abs(pair[0] - one[0]) < 1e-6  # without a head file, one logit = the pair head's difference


def test_tower_forwards_never_wait_for_the_device(scorer):
    """Every forward a graph captures: no operation reads a tensor's value back into Python."""
    clip, text, itm = scorer.backbone("clip"), scorer.backbone("mclip-text"), scorer.backbone("blip-itm")
    ids, mask, _ = tokenize_truncating(clip.tokenizer, TEXTS, clip.max_tokens)
    st_ids, st_mask, _ = tokenize_truncating(text.tokenizer, TEXTS, text.max_tokens)
    itm_ids, itm_mask, _ = tokenize_truncating(itm.tokenizer, TEXTS, itm.max_tokens)
    height, width = itm.preprocess.resize_to or itm.preprocess.crop
    with inference(), NoHostSync():
        clip._text_forward(ids)
        clip._image_forward(torch.randn(2, 3, *clip.preprocess.crop))
        text._text_forward(st_ids, st_mask)
        states = itm._image_forward(torch.randn(len(TEXTS), 3, height, width))
        itm._pair_forward(itm_ids, itm_mask, states)


def test_a_mask_left_for_transformers_to_check_would_wait_for_the_device(scorer):
    """The check above can fail: transformers reads a 0/1 mask's contents."""
    clip = scorer.backbone("clip")
    ids, mask, _ = tokenize_truncating(clip.tokenizer, TEXTS, clip.max_tokens)
    with inference(), NoHostSync(), pytest.raises(AssertionError, match="waits for the device"):
        clip.model.text_model(input_ids=ids, attention_mask=mask)


def test_graphs_are_off_on_the_cpu_and_small_batches_unpadded(scorer):
    tower = scorer.backbone("clip")
    assert not tower.text_graph.enabled and not graphs.pads(torch.device("cpu"))
    seen = []
    original = tower.text_graph.forward
    tower.text_graph.forward = lambda ids: seen.append(tuple(ids.shape)) or original(ids)
    try:
        tower._encode_text_batch(TEXTS[:3])
    finally:
        tower.text_graph.forward = original
    assert seen[0][0] == 3


def test_scores_equal_with_and_without_padding(scorer, monkeypatch):
    items = [ScoreItem(Image.new("RGB", (48, 40), (180, 40, 40)), "a red square", ["a red block"]),
             ScoreItem(Image.new("RGB", (48, 40), (40, 40, 180)), "a blue square on a table", ["a blue block"])]
    names = [n for n in scorer.metric_names() if scorer.unavailable_reason(n) is None and scorer.info(n).needs_image]
    _padded(monkeypatch, False)
    scorer.clear_caches()
    plain = scorer.score(items, names)
    _padded(monkeypatch, True)
    scorer.clear_caches()
    padded = scorer.score(items, names)
    assert len(names) >= 6
    for name in names:
        assert np.allclose(padded[name].values, plain[name].values, atol=1e-5), name


class _RecordedGraph:
    """Stands in for a CUDA graph on the CPU: replay runs the forward on the graph's buffers."""

    def __init__(self, forward, static_inputs):
        self.forward, self.static_inputs, self.replays = forward, static_inputs, 0
        self.output = forward(*static_inputs)

    def replay(self):
        self.replays += 1
        self.output.copy_(self.forward(*self.static_inputs))


class _CpuGraphed(graphs.GraphedForward):
    def __init__(self, forward):
        super().__init__(forward, torch.device("cpu"), "test tower")
        self.enabled = True
        self.recorded = []

    def _capture(self, inputs):
        static = [t.clone() for t in inputs]
        graph = _RecordedGraph(self.forward, static)
        self.recorded.append(graph)
        return graph, static, graph.output


def test_a_new_shape_runs_eagerly_and_is_captured_before_the_next_request():
    weight = torch.randn(4, 3)
    tower = _CpuGraphed(lambda x: x @ weight)
    first, second = torch.randn(2, 4), torch.randn(2, 4)
    assert torch.equal(tower(first), first @ weight) and tower.captured == 0  # eager, remembered
    assert graphs.capture_pending() == 1 and tower.captured == 1 and graphs.capture_pending() == 0
    out = tower(second)  # replayed on the graph's buffers, cloned out
    assert tower.recorded[0].replays == 1 and torch.allclose(out, second @ weight)
    assert out.data_ptr() != tower.recorded[0].output.data_ptr()
    assert torch.equal(tower(torch.randn(3, 4))[:0], torch.zeros(0, 3))  # 3 rows is no bucket: eager, not kept
    assert graphs.capture_pending() == 0


def test_graphs_are_captured_only_with_the_device_to_themselves():
    import threading

    tower = _CpuGraphed(lambda x: x * 2)
    tower(torch.ones(1, 2))
    started, release = threading.Event(), threading.Event()

    def request():
        with graphs.DEVICE_WORK.shared():
            started.set()
            release.wait(5)

    worker = threading.Thread(target=request)
    worker.start()
    started.wait(5)
    assert graphs.capture_pending() == 0 and tower.captured == 0  # work in flight: captured later
    release.set()
    worker.join()
    assert graphs.capture_pending() == 1 and tower.captured == 1


def test_shared_holds_nest_and_wait_for_a_capture():
    import threading

    lock = graphs.SharedExclusive()
    with lock.shared(), lock.shared():
        with lock.exclusive(1) as held:  # a holder cannot wait for itself: no deadlock
            assert not held
    order = []
    with lock.exclusive(1) as held:
        assert held
        thread = threading.Thread(target=lambda: lock.shared().__enter__() or order.append("request"))
        thread.start()
        thread.join(0.2)
        order.append("capture done")
    thread.join(5)
    assert order == ["capture done", "request"]
