"""Learned metrics against hand computations on the raw transformers models."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from scoring.api import ScoreItem

CAPTIONS = ["a dog on the grass", "two red cars", "a small white cat", "people walking on the street", "a blue boat", "a tree"]
REFERENCES = [
    ["a dog", "a brown dog sitting on green grass"],
    ["a red car", "cars on a road"],
    ["a cat"],
    ["a man and a woman walking", "people on a street", "two people"],
    ["a boat on the water"],
    ["a big tree in a field", "trees"],
]


def _hand_clip_embeddings(backbone, images, texts):
    """Encode with the raw CLIPModel (no cache, no batching helpers)."""
    model, tokenizer, processor = backbone.model, backbone.tokenizer, backbone.image_processor
    with torch.no_grad():
        pixels = processor(images=images, return_tensors="pt")["pixel_values"]
        v = model.get_image_features(pixel_values=pixels).pooler_output
        tokens = tokenizer(texts, padding=True, return_tensors="pt")
        t = model.get_text_features(**tokens).pooler_output
    return (torch.nn.functional.normalize(v, dim=-1).numpy().astype(np.float64),
            torch.nn.functional.normalize(t, dim=-1).numpy().astype(np.float64))


@pytest.mark.parametrize("plain,ref,backbone,w", [("CLIP-S", "RefCLIP-S", "clip", 2.5), ("PAC-S", "RefPAC-S", "pacs", 2.0)])
def test_clip_family_matches_hand_computation(tiny_scorer, images, plain, ref, backbone, w):
    items = [ScoreItem(im, c, r) for im, c, r in zip(images, CAPTIONS, REFERENCES)]
    results = tiny_scorer.score(items, [plain, ref])
    prefix = tiny_scorer.info(plain).prefix
    assert prefix == "A photo depicts " and tiny_scorer.info(plain).w == w

    model = tiny_scorer.backbone(backbone)
    v, t = _hand_clip_embeddings(model, images, [prefix + c for c in CAPTIONS])
    cos = np.sum(v * t, axis=1)
    expected_plain = w * np.maximum(cos, 0)
    expected_ref = []
    for i, refs in enumerate(REFERENCES):
        _, r = _hand_clip_embeddings(model, images[:1], [prefix + x for x in refs])
        a = expected_plain[i]
        b = max(0.0, float(np.max(r @ t[i])))
        expected_ref.append(0.0 if a + b == 0 else 2 * a * b / (a + b))
    # The hand computation is only a real check if some of the clipped values are non-zero.
    assert np.count_nonzero(expected_plain) >= 1 and np.count_nonzero(expected_ref) >= 1
    np.testing.assert_allclose(results[plain].values, expected_plain, atol=1e-5)
    np.testing.assert_allclose(results[ref].values, expected_ref, atol=1e-5)
    assert results[ref].aggregate == pytest.approx(np.mean(expected_ref), abs=1e-5)


def test_ref_metrics_need_references(tiny_scorer, images):
    items = [ScoreItem(images[0], "a dog", []), ScoreItem(images[1], "a cat", ["a cat"]), ScoreItem(None, "x", ["x"])]
    results = tiny_scorer.score(items, ["CLIP-S", "RefCLIP-S"])
    assert results["RefCLIP-S"].values[0] is None and results["RefCLIP-S"].values[1] is not None
    assert results["CLIP-S"].values[2] is None and results["RefCLIP-S"].values[2] is None


def test_mcs_matches_hand_computation(tiny_scorer, images):
    """MCS = 2.5·max(cos(CLIP image, mean-pooled DistilBERT → dense), 0), no prefix."""
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    folder = tiny_scorer.registry.backbones["mclip-text"].path
    texts = ["ein hund", "un chat rouge", "犬の写真", "a dog"]
    results = tiny_scorer.score([ScoreItem(im, c, lang="xx") for im, c in zip(images, texts)], ["MCS"])
    model, tokenizer = AutoModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    dense = load_file(str(folder / "2_Dense" / "model.safetensors"))["linear.weight"]
    with torch.no_grad():
        tokens = tokenizer(texts, padding=True, return_tensors="pt")
        hidden = model(**tokens).last_hidden_state
        mask = tokens["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        t = torch.nn.functional.normalize(pooled @ dense.T, dim=-1).numpy()
    v = tiny_scorer.image_embeddings(images[: len(texts)], backbone="clip")
    expected = 2.5 * np.maximum(np.sum(v * t, axis=1), 0)
    np.testing.assert_allclose(results["MCS"].values, expected, atol=1e-5)


def test_umic_c_is_the_itm_head_match_probability(tiny_scorer, images):
    from transformers import BlipForImageTextRetrieval, BlipProcessor

    folder = tiny_scorer.registry.backbones["blip-itm"].path
    texts = ["a dog on the grass", "two red cars", "a cat"]
    results = tiny_scorer.score([ScoreItem(im, c) for im, c in zip(images, texts)], ["UMIC-C"])
    model, processor = BlipForImageTextRetrieval.from_pretrained(folder).eval(), BlipProcessor.from_pretrained(folder)
    with torch.no_grad():
        batch = processor(images=images[:3], text=texts, padding=True, return_tensors="pt")
        logits = model(**batch, use_itm_head=True).itm_score
    np.testing.assert_allclose(results["UMIC-C"].values, logits.softmax(-1)[:, 1].numpy(), atol=1e-5)
    assert "BLIP" in tiny_scorer.info("UMIC-C").description


def test_specs_reads_248_tokens(tiny_scorer, images):
    """A caption of ~150 tokens is truncated for CLIP-S (77) but not for SPECS (248)."""
    long_caption = "a dog on the grass next to a red car " * 15
    very_long = long_caption * 3
    results = tiny_scorer.score(
        [ScoreItem(images[0], long_caption), ScoreItem(images[1], very_long), ScoreItem(images[2], "a dog")],
        ["CLIP-S", "SPECS", "MCS", "UMIC-C"],
    )
    assert results["CLIP-S"].truncated == [True, True, False]
    assert results["SPECS"].truncated == [False, True, False]
    assert results["MCS"].truncated == [True, True, False]  # longer than the multilingual text encoder reads
    assert results["UMIC-C"].truncated == [True, True, False]
    assert all(isinstance(v, float) for r in results.values() for v in r.values)
    assert tiny_scorer.backbone("specs").max_tokens == 248


def test_reference_metrics_flag_truncated_candidates_and_descriptions_name_the_model(tiny_scorer, images):
    """RefCLIP-S and RefPAC-S read the candidate with CLIP's 77 tokens, so they flag the same
    truncations as CLIP-S; each description names the embedding model it uses."""
    long_caption = "a dog on the grass next to a red car " * 15
    items = [ScoreItem(images[0], long_caption, ["a dog"]), ScoreItem(images[1], "a dog", ["a dog on grass"])]
    results = tiny_scorer.score(items, ["RefCLIP-S", "RefPAC-S"])
    assert results["RefCLIP-S"].truncated == results["RefPAC-S"].truncated == [True, False]
    assert "between the CLIP embeddings" in tiny_scorer.info("CLIP-S").description
    assert "between the PAC-S fine-tuned CLIP embeddings" in tiny_scorer.info("PAC-S").description


def test_embeddings_api_is_normalised_and_cached(tiny_scorer, images):
    v = tiny_scorer.image_embeddings(images[:3])
    t = tiny_scorer.text_embeddings(["a dog", "a cat"], prefix="A photo depicts ")
    assert v.shape == (3, 64) and t.shape == (2, 64) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    m = tiny_scorer.text_embeddings(["ein hund"], backbone="mclip-text")
    assert m.shape == (1, 64)
    with pytest.raises(ValueError, match="backbone 'mclip-text' has no image tower"):
        tiny_scorer.image_embeddings(images[:1], backbone="mclip-text")


def test_st_dense_weights_as_pytorch_bin_load_the_same(tiny_dir, tmp_path, tiny_scorer):
    """The published multilingual encoder ships 2_Dense/pytorch_model.bin; both files load alike."""
    import shutil

    from safetensors.torch import load_file

    from scoring.api import Scorer

    folder = tmp_path / "st-bin"
    shutil.copytree(tiny_dir / "mclip-text", folder)
    weights = load_file(str(folder / "2_Dense" / "model.safetensors"))
    (folder / "2_Dense" / "model.safetensors").unlink()
    torch.save(weights, folder / "2_Dense" / "pytorch_model.bin")
    profile = tmp_path / "st.toml"
    profile.write_text(f'[backbones.text]\nkind = "st-text"\npath = "{folder}"\n')
    texts = ["ein hund", "un chat rouge", "a dog"]
    from_bin = Scorer(profile, device="cpu").text_embeddings(texts, backbone="text")
    np.testing.assert_allclose(from_bin, tiny_scorer.text_embeddings(texts, backbone="mclip-text"), atol=1e-6)
