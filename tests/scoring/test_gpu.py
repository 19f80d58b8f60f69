"""The CUDA path: nvJPEG decoding, fast preprocessing on the device, real out-of-memory
halving. Skipped without a GPU (benchmarks/gpu_suite.sh runs them on one)."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from scoring.api import Scorer
from scoring.batching import map_halving
from scoring.images import decode_image
from scoring.pixels import ImagePipeline
from tests.scoring.test_pixels import FAST_TOLERANCE, example_items, jpeg_with_orientation, marked_image

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def photo_jpeg(seed: int, size=(320, 240)) -> bytes:
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0 : size[1], 0 : size[0]]
    pixels = np.stack([128 + 90 * np.sin(x / (20 + seed)), 128 + 90 * np.cos(y / 30), (x + y) % 256], -1)
    pixels = pixels + rng.normal(0, 4, pixels.shape)
    buffer = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def test_nvjpeg_decodes_like_pillow_and_applies_orientation():
    pipeline = ImagePipeline("cuda", mode="fast")
    sources = [photo_jpeg(seed) for seed in range(4)] + [jpeg_with_orientation(marked_image(), 6)]
    decoded = pipeline.decode([f"k{i}" for i in range(len(sources))], sources)
    assert all(t.is_cuda and t.dtype == torch.uint8 for t in decoded)
    for tensor, data in zip(decoded, sources):
        expected = np.asarray(decode_image(data).image).astype(int)
        got = tensor.permute(1, 2, 0).cpu().numpy().astype(int)
        assert got.shape == expected.shape  # the EXIF-rotated one is portrait on both paths
        # IDCT and chroma upsampling differ: a level or two on average, more at sharp colour edges.
        assert np.abs(got - expected).mean() < 2.0


@pytest.mark.parametrize("profile", ["tiny", "world"])
def test_fast_on_cuda_within_tolerance_of_reference_on_cpu(tiny_dir, profile, monkeypatch):
    """nvJPEG + device preprocessing (fp32, so only preprocessing differs) against each
    checkpoint's own processor on the CPU."""
    items = example_items()
    reference = np.array(Scorer(profile, device="cpu").score(items, ["CLIP-S"])["CLIP-S"].values)
    for name in ("CLIP", "MCLIP_TEXT"):
        monkeypatch.setenv(f"CAPLENS_REGISTRY_{name}_PRECISION", "fp32")
    fast = Scorer(profile, device="cuda", preprocess="fast")
    assert fast.backbone("clip").placement.dtype == torch.float32
    values = np.array(fast.score(items, ["CLIP-S"])["CLIP-S"].values)
    assert np.abs(values - reference).max() <= FAST_TOLERANCE


def test_real_out_of_memory_halves_the_batch():
    free, _ = torch.cuda.mem_get_info()
    per_item = free // 3  # four items at once cannot fit, one can

    def allocate(chunk):
        block = torch.empty(len(chunk) * per_item, dtype=torch.uint8, device="cuda")
        return [int(block.numel() // per_item)]

    outputs, size = map_halving(allocate, list(range(5)), 4)
    assert sum(n for (n,) in outputs) == 5 and size <= 2


def test_small_batches_replay_captured_graphs_and_score_as_eager_runs(tiny_dir, monkeypatch):
    """Every tower of a 1 x N request replays a captured CUDA graph (none fell back), and the
    scores equal the eager run's (same precision, other kernels: fp16 rounding only)."""
    items = example_items()
    monkeypatch.setenv("CAPLENS_CUDA_GRAPHS", "0")
    eager = Scorer("tiny", device="cuda")
    names = [n for n in eager.metric_names() if eager.unavailable_reason(n) is None and eager.info(n).needs_image]
    expected = eager.score(items, names)
    monkeypatch.delenv("CAPLENS_CUDA_GRAPHS")
    graphed = Scorer("tiny", device="cuda")
    for _ in range(2):  # the first call captures, the second replays
        graphed.clear_caches()
        got = graphed.score(items, names)
    towers = [getattr(b, kind) for b in graphed._backbones.values()
              for kind in ("text_graph", "image_graph", "pair_graph") if hasattr(b, kind)]
    assert len(towers) >= 6 and all(t.enabled for t in towers)
    assert [t.name for t in towers if t.failure] == []
    assert [t.name for t in towers if not t.captured] == []
    for name in names:
        scored = [i for i, v in enumerate(expected[name].values) if v is not None]
        assert scored == [i for i, v in enumerate(got[name].values) if v is not None], name
        assert np.allclose([got[name].values[i] for i in scored], [expected[name].values[i] for i in scored],
                           atol=2e-3), name
    assert sum(bool(r.values) and r.values[0] is not None for r in got.values()) >= 6


def test_every_image_keeps_its_own_embedding_run_after_run(tiny_dir, monkeypatch):
    """Streamed passes of 128 photos (640x480), the Scorer's caches emptied between runs as the
    benchmark empties them, give the embeddings of a serial pass (one stage at a time). (On the
    H100, bench_clipscore saw some pairs' CLIP-S 0.04-0.11 off the plain loop on a Scorer's later
    runs with full-batch CUDA graphs or a smaller first pass, both since taken out; this test, on
    the tiny model, passed with the smaller first pass, so it does not reproduce that.)"""
    from scoring import stages

    monkeypatch.setenv("CAPLENS_IMAGE_BATCH", "128")
    pictures = [photo_jpeg(seed, size=(640, 480)) for seed in range(600)]
    scorer = Scorer("tiny", device="cuda")
    with stages.recording(sync=True):
        expected = scorer.image_embeddings(pictures)
    for _ in range(3):
        scorer.clear_caches()
        scorer.images.decoded.clear()
        got = scorer.image_embeddings(pictures)
        assert np.abs(got - expected).max() < 2e-3
    assert np.abs(expected[0] - expected[1]).max() > 1e-2


def test_transfers_through_pinned_memory_keep_every_byte():
    from scoring.transfer import pinned_views, to_device, to_host

    chunks = [photo_jpeg(seed) for seed in range(3)] + [b"\xff"]
    views = pinned_views(chunks)
    assert all(view.is_pinned() for view in views)
    assert [bytes(view.numpy()) for view in views] == chunks
    values = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    on_device = to_device(values, "cuda")
    assert on_device.is_cuda and torch.equal(on_device.cpu(), values)
    back = to_host(on_device * 2)
    assert isinstance(back, np.ndarray) and np.array_equal(back, values.numpy() * 2)
