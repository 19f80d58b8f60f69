"""The world's small models: their shapes, their factories, and their two trainings.

- world-CLIP: a transformers `CLIPModel` trained from scratch with CLIP's symmetric InfoNCE
  on English captions of rendered scenes (recipe `world-clip`);
- world-MCS: a multilingual text student (`BertModel` + mean pooling + dense), distilled by MSE
  into world-CLIP's text embedding space from captions in five languages (recipe
  `mcs-teacher`; PR-MCS §3.1, appendix A);
- world ITM: a small BLIP image-text-matching cross-encoder built here and trained by the
  `itm` recipe, so that UMIC-C (and UMIC on top of it) exist offline.

Both trainings run on the one trainer of `scoring.training`; model shapes are data
(`MODEL_CONFIGS`), each with one factory.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from torch import nn

from .captions import describe_long, describe_short, realise
from .grammar import Description
from .errors import CONTENT_ERRORS, apply_error
from .scene import Scene

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

MODEL_CONFIGS = {
    "world-clip": {
        "image_size": 96, "patch_size": 16, "vision_width": 128, "vision_layers": 3, "vision_heads": 4,
        "text_width": 128, "text_layers": 3, "text_heads": 4, "text_positions": 192, "projection_dim": 128,
        "vocab_size": 3000,
    },
    "world-mcs": {"width": 128, "layers": 3, "heads": 4, "positions": 320, "vocab_size": 2000},
    "world-itm": {"image_size": 96, "patch_size": 16, "vision_width": 128, "vision_layers": 3, "text_width": 128,
                  "text_layers": 3, "heads": 4, "text_positions": 192, "vocab_size": 2000},
    # Seconds-long variants for tests.
    "test-clip": {
        "image_size": 32, "patch_size": 8, "vision_width": 32, "vision_layers": 1, "vision_heads": 2,
        "text_width": 32, "text_layers": 1, "text_heads": 2, "text_positions": 192, "projection_dim": 32,
        "vocab_size": 600,
    },
    "test-mcs": {"width": 32, "layers": 1, "heads": 2, "positions": 320, "vocab_size": 600},
    "test-itm": {"image_size": 32, "patch_size": 8, "vision_width": 32, "vision_layers": 1, "text_width": 32,
                 "text_layers": 1, "heads": 2, "text_positions": 192, "vocab_size": 600},
}


def model_config(name: str) -> dict:
    if name not in MODEL_CONFIGS:
        raise ValueError(f"unknown world model config {name!r}; available: {', '.join(MODEL_CONFIGS)}")
    return MODEL_CONFIGS[name]


def build_clip(config_name: str, tokenizer):
    from transformers import CLIPConfig, CLIPModel

    c = model_config(config_name)
    config = CLIPConfig(
        text_config={
            "vocab_size": len(tokenizer), "hidden_size": c["text_width"], "intermediate_size": 4 * c["text_width"],
            "num_hidden_layers": c["text_layers"], "num_attention_heads": c["text_heads"],
            "max_position_embeddings": c["text_positions"], "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
        },
        vision_config={
            "image_size": c["image_size"], "patch_size": c["patch_size"], "hidden_size": c["vision_width"],
            "intermediate_size": 4 * c["vision_width"], "num_hidden_layers": c["vision_layers"],
            "num_attention_heads": c["vision_heads"],
        },
        projection_dim=c["projection_dim"],
    )
    return CLIPModel(config)


def clip_processor(tokenizer, image_size: int):
    """The Pillow image processor, as the loaders read it (`backend="pil"`): the default one
    needs torchvision, which CapLens does not install (transformers warned on every run)."""
    from transformers import CLIPProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    return CLIPProcessor(
        image_processor=CLIPImageProcessorPil(
            size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size},
            resample=1, image_mean=CLIP_MEAN, image_std=CLIP_STD),
        tokenizer=tokenizer)


class TextStudent(nn.Module):
    """BertModel -> attention-masked mean pooling -> linear (identity activation), as in sentence-transformers."""

    def __init__(self, bert, out_features: int):
        super().__init__()
        self.bert = bert
        self.dense = nn.Linear(bert.config.hidden_size, out_features)

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return self.dense(pooled)


def build_student(config_name: str, tokenizer, out_features: int) -> TextStudent:
    from transformers import BertConfig, BertModel

    c = model_config(config_name)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=c["width"], num_hidden_layers=c["layers"],
                        num_attention_heads=c["heads"], intermediate_size=4 * c["width"],
                        max_position_embeddings=c["positions"], pad_token_id=tokenizer.pad_token_id)
    return TextStudent(BertModel(config, add_pooling_layer=False), out_features)


def build_itm(config_name: str, tokenizer):
    """A small `BlipForImageTextRetrieval` and its `BlipProcessor` (CLIP normalisation, square resize)."""
    from transformers import BlipConfig, BlipForImageTextRetrieval, BlipProcessor

    try:  # the PIL processor needs no torchvision (absent from CPU-only installs)
        from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil as ImageProcessor
    except ImportError:
        from transformers import BlipImageProcessor as ImageProcessor

    c = model_config(config_name)
    config = BlipConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=c["text_width"], encoder_hidden_size=c["vision_width"],
            intermediate_size=4 * c["text_width"], num_hidden_layers=c["text_layers"], num_attention_heads=c["heads"],
            max_position_embeddings=c["text_positions"], pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id),
        vision_config=dict(
            hidden_size=c["vision_width"], intermediate_size=4 * c["vision_width"], num_hidden_layers=c["vision_layers"],
            num_attention_heads=c["heads"], image_size=c["image_size"], patch_size=c["patch_size"]),
        projection_dim=c["text_width"],
    )
    processor = BlipProcessor(
        image_processor=ImageProcessor(size={"height": c["image_size"], "width": c["image_size"]},
                                              image_mean=CLIP_MEAN, image_std=CLIP_STD),
        tokenizer=tokenizer)
    return BlipForImageTextRetrieval(config), processor


# -- training data --------------------------------------------------------------------------------
def short_descriptions(scene: Scene, variants: int = 6) -> dict[str, Description]:
    """A scene's distinct short English training captions, each with the description it realises."""
    rng = random.Random(scene.seed)
    found = {}
    for _ in range(variants):
        description = describe_short(scene, rng)
        found.setdefault(realise(description, "en").text, description)
    return found


def caption_twins(scene: Scene, shorts: dict[str, Description], size: int, places_share: float | None = None,
                  edits: tuple[str, ...] | None = None, language: str = "en") -> dict[str, dict]:
    """Per short caption (keyed by its English text), its counterfactual twin as training-row
    fields (`caption`, `twin_image`, `twin_id`, `twin_caption`, `twin_edit`): `counterfactual_twin`
    drawn from a seed of the scene and caption, each distinct twin rendered once, both captions
    realised in `language`. `edits` keeps only those kinds ("places", "shape"); a caption without a
    kept twin is left out. The twin drawn does not depend on `language`."""
    from scoring.world.captions import counterfactual_twin
    from scoring.world.render import render_scene

    out, images = {}, {}
    for text in sorted(shorts):
        twin = counterfactual_twin(scene, shorts[text], random.Random(f"{scene.seed}:{text}"), places_share)
        if twin is None or (edits is not None and twin[0].split(":")[0] not in edits):
            continue
        edit, twin_scene, description = twin
        if edit not in images:
            images[edit] = render_scene(twin_scene, size)
        out[text] = {"caption": realise(shorts[text], language).text, "twin_image": images[edit],
                     "twin_id": f"{scene.scene_id}~{edit}", "twin_caption": realise(description, language).text,
                     "twin_edit": edit.split(":")[0]}
    return out


def english_captions(scene: Scene, short_variants: int = 6, long: bool = True) -> list[str]:
    """Training captions of a scene: several short ones and (if `long` and the scene has >= 3 objects) the long one."""
    texts = set(short_descriptions(scene, short_variants))
    if long and len(scene.objects) >= 3:
        texts.add(realise(describe_long(scene), "en").text)
    return sorted(texts)


def distillation_descriptions(scene: Scene) -> list:
    """Descriptions the student learns: short, long and every controlled content error of them."""
    rng = random.Random(scene.seed)
    base = [describe_short(scene, rng), describe_short(scene, rng)]
    if len(scene.objects) >= 3:
        base.append(describe_long(scene))
    out = list(base)
    for d in base:
        for kind in CONTENT_ERRORS:
            erred = apply_error(scene, d, kind, rng)
            if erred is not None:
                out.append(erred)
    return out


# -- the two world trainings, on the one trainer ----------------------------------------------------
def _run(recipe: str, out_dir: str | Path, *, teacher: str | None, config: str, scenes: int, steps: int,
         batch_size: int, lr: float, weight_decay: float, seed: int, threads: int, tokenizer_scenes: int,
         loss: dict | None = None, log=print) -> dict:
    from scoring.training import TrainConfig, train

    run = TrainConfig(
        recipe=recipe, data={"world": {"scenes": scenes, "split": "train",
                                       **({"image_size": model_config(config)["image_size"]} if recipe == "world-clip" else {})}},
        out=str(out_dir), teacher=teacher, architecture={"config": config, "tokenizer_scenes": tokenizer_scenes},
        loss=dict(loss or {}),
        optimizer={"name": "adamw", "lr": lr, "weight_decay": weight_decay}, schedule={"name": "cosine", "warmup": 0.05},
        batch_size=batch_size, max_steps=steps, seed=seed, device="cpu", precision="fp32", heldout_fraction=0.05,
        max_heldout=200, threads=threads)
    result = train(run, log=log)
    return json.loads((result.out_dir / "training.json").read_text(encoding="utf-8"))


def train_clip(out_dir: str | Path, *, config: str = "world-clip", scenes: int = 8000, steps: int = 1000,
               batch_size: int = 64, lr: float = 1e-3, seed: int = 0, threads: int = 1,
               tokenizer_scenes: int = 1500, swap: float = 0.0, log=print) -> dict:
    """Train world-CLIP from scratch and save it as a CLIPModel folder; returns its training.json.
    `swap` weighs each caption with one word swapped as a wrong caption in the image → text
    softmax (the world-clip recipe's `loss.swap`)."""
    return _run("world-clip", out_dir, teacher=None, config=config, scenes=scenes, steps=steps, batch_size=batch_size,
                lr=lr, weight_decay=0.1, seed=seed, threads=threads, tokenizer_scenes=tokenizer_scenes,
                loss={"swap": swap} if swap else None, log=log)


def train_mcs(clip_dir: str | Path, out_dir: str | Path, *, config: str = "world-mcs", scenes: int = 1200,
              steps: int = 800, batch_size: int = 64, lr: float = 1e-3, seed: int = 0, threads: int = 1,
              tokenizer_scenes: int = 1500, log=print) -> dict:
    """Distil world-CLIP's text tower into a multilingual student (MSE, PR-MCS teacher learning)."""
    return _run("mcs-teacher", out_dir, teacher=str(clip_dir), config=config, scenes=scenes, steps=steps,
                batch_size=batch_size, lr=lr, weight_decay=0.01, seed=seed, threads=threads,
                tokenizer_scenes=tokenizer_scenes, log=log)
