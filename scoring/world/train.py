"""Train the world's small models on the CPU, in the formats the normal loading code reads.

- world-CLIP: a transformers `CLIPModel` trained contrastively (CLIP's symmetric InfoNCE) on
  English captions of rendered scenes; saved with `CLIPProcessor` (tokenizer + image processor).
- world-MCS: a multilingual text student (`BertModel` + mean pooling + dense), distilled by MSE
  into world-CLIP's text embedding space from captions in five languages (PR-MCS §3.1,
  appendix A: teacher = CLIP text embedding of the English sentence, student = its translation);
  saved in the sentence-transformers folder layout.

Model shapes are data (`MODEL_CONFIGS`); `build_clip` / `build_student` are the one factory each.
"""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .captions import describe_long, describe_short, realise
from .errors import CONTENT_ERRORS, apply_error
from .grammar import LANGUAGES
from .render import render_scene
from .scene import Scene
from .sets import split_scenes
from .tokenizer import CLIP_PREFIX, train_tokenizer, train_wordpiece, world_corpus

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

MODEL_CONFIGS = {
    "world-clip": {
        "image_size": 96, "patch_size": 16, "vision_width": 128, "vision_layers": 3, "vision_heads": 4,
        "text_width": 128, "text_layers": 3, "text_heads": 4, "text_positions": 192, "projection_dim": 128,
        "vocab_size": 3000,
    },
    "world-mcs": {"width": 128, "layers": 3, "heads": 4, "positions": 320, "vocab_size": 2000},
    # Seconds-long variants for tests.
    "test-clip": {
        "image_size": 32, "patch_size": 8, "vision_width": 32, "vision_layers": 1, "vision_heads": 2,
        "text_width": 32, "text_layers": 1, "text_heads": 2, "text_positions": 192, "projection_dim": 32,
        "vocab_size": 600,
    },
    "test-mcs": {"width": 32, "layers": 1, "heads": 2, "positions": 320, "vocab_size": 600},
}


def _config(name: str) -> dict:
    if name not in MODEL_CONFIGS:
        raise ValueError(f"unknown world model config {name!r}; available: {', '.join(MODEL_CONFIGS)}")
    return MODEL_CONFIGS[name]


def build_clip(config_name: str, tokenizer):
    from transformers import CLIPConfig, CLIPModel

    c = _config(config_name)
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

    c = _config(config_name)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=c["width"], num_hidden_layers=c["layers"],
                        num_attention_heads=c["heads"], intermediate_size=4 * c["width"],
                        max_position_embeddings=c["positions"], pad_token_id=tokenizer.pad_token_id)
    return TextStudent(BertModel(config, add_pooling_layer=False), out_features)


# -- data --------------------------------------------------------------------------------------
def pixel_tensor(images, image_size: int) -> torch.Tensor:
    """Images -> normalised (N, 3, H, W) float tensor, the same normalisation as the saved processor."""
    arrays = [np.asarray(im.convert("RGB").resize((image_size, image_size)), dtype=np.float32) / 255.0
              for im in images]
    x = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)
    mean = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    return (x - mean) / std


def english_captions(scene: Scene, short_variants: int = 6, long: bool = True) -> list[str]:
    """Training captions of a scene: several short ones and (if `long` and the scene has >= 3 objects) the long one."""
    rng = random.Random(scene.seed)
    texts = {realise(describe_short(scene, rng), "en").text for _ in range(short_variants)}
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


def _lr(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * 0.5 * (1 + math.cos(math.pi * progress))


def _tokenize(tokenizer, texts: list[str], max_length: int) -> dict:
    return tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")


def _start_run(seed: int, threads: int) -> tuple[random.Random, float, float]:
    """Seed torch and a local RNG, fix the thread count, and start the wall and CPU clocks
    that a run's training.json reports."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    return random.Random(seed), time.time(), time.process_time()


# -- world-CLIP ---------------------------------------------------------------------------------
def _scheduled_steps(model, optimizer, steps: int, peak_lr: float):
    """The step numbers of a training run, each with its learning rate (warm-up over the first
    5 %, see `_lr`) set on the optimiser; the model is in training mode throughout."""
    model.train()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = _lr(step, steps, peak_lr, warmup=max(1, steps // 20))
        yield step


def _optimise(optimizer, model, loss: torch.Tensor) -> None:
    """One optimiser step with the gradient norm clipped at 1."""
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def _log_step(history: list, run: str, measure: str, digits: int, step: int, steps: int, loss: float,
              started: float) -> None:
    """Keep the step's loss in the run's history and tell the console."""
    history.append({"step": step, "loss": round(loss, digits), "seconds": round(time.time() - started, 1)})
    print(f"{run} step {step}/{steps} {measure} {loss:.{digits}f} ({time.time() - started:.0f}s)", flush=True)


def clip_loss(model, batch_ids, batch_mask, pixels) -> torch.Tensor:
    return model(input_ids=batch_ids, attention_mask=batch_mask, pixel_values=pixels, return_loss=True).loss


def train_clip(out_dir: str | Path, *, config: str = "world-clip", scenes: int = 8000, steps: int = 1000,
               batch_size: int = 64, lr: float = 1e-3, long_share: float = 0.3, seed: int = 0, threads: int = 1,
               log_every: int = 50, tokenizer_scenes: int = 1500) -> dict:
    """Train world-CLIP and save it as a CLIPModel folder; returns the training metadata."""
    from transformers import CLIPImageProcessor, CLIPProcessor

    rng, started, cpu_started = _start_run(seed, threads)
    out_dir = Path(out_dir)
    c = _config(config)
    tokenizer = train_tokenizer(world_corpus(tokenizer_scenes), out_dir, vocab_size=c["vocab_size"],
                                model_max_length=c["text_positions"])
    train_scenes = split_scenes("train", scenes)
    pixels = pixel_tensor([render_scene(s, c["image_size"]) for s in train_scenes], c["image_size"])
    short = [english_captions(s, long=False) for s in train_scenes]
    long_idx = [i for i, s in enumerate(train_scenes) if len(s.objects) >= 3]
    long = {i: realise(describe_long(train_scenes[i]), "en").text for i in long_idx}
    model = build_clip(config, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    history = []
    for step in _scheduled_steps(model, optimizer, steps, lr):
        # Batches are all-short or all-long so short batches are not padded to long-caption length.
        if long_idx and rng.random() < long_share:
            idx = rng.sample(long_idx, min(batch_size, len(long_idx)))
            texts = [long[i] for i in idx]
        else:
            idx = rng.sample(range(len(train_scenes)), min(batch_size, len(train_scenes)))
            texts = [rng.choice(short[i]) for i in idx]
        texts = [(CLIP_PREFIX if rng.random() < 0.5 else "") + t for t in texts]
        tokens = _tokenize(tokenizer, texts, c["text_positions"])
        loss = clip_loss(model, tokens["input_ids"], tokens["attention_mask"], pixels[idx])
        _optimise(optimizer, model, loss)
        if step % log_every == 0 or step == steps - 1:
            _log_step(history, "world-clip", "loss", 4, step, steps, loss.item(), started)
    model.eval()
    processor = CLIPProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": c["image_size"]}, crop_size={"height": c["image_size"], "width": c["image_size"]},
            resample=1, image_mean=CLIP_MEAN, image_std=CLIP_STD),
        tokenizer=tokenizer)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    meta = {"model": "world-clip", "config": config, "config_values": c, "train_scenes": scenes,
            "train_seed_range": [0, scenes], "steps": steps, "batch_size": batch_size, "lr": lr, "long_share": long_share,
            "seed": seed, "threads": threads, "loss": "CLIP symmetric InfoNCE", "history": history,
            "seconds": round(time.time() - started, 1), "cpu_seconds": round(time.process_time() - cpu_started, 1),
            "torch": torch.__version__}
    (out_dir / "training.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return meta


# -- world-MCS ----------------------------------------------------------------------------------
def save_student(student: TextStudent, tokenizer, out_dir: Path, max_seq_length: int) -> None:
    """Sentence-transformers layout: transformer at the root, 1_Pooling (mean), 2_Dense (identity)."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    student.bert.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    width = student.bert.config.hidden_size
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    (out_dir / "modules.json").write_text(json.dumps(modules, indent=1), encoding="utf-8")
    (out_dir / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}), encoding="utf-8")
    (out_dir / "1_Pooling").mkdir(exist_ok=True)
    (out_dir / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": width, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, indent=1), encoding="utf-8")
    (out_dir / "2_Dense").mkdir(exist_ok=True)
    (out_dir / "2_Dense" / "config.json").write_text(json.dumps({
        "in_features": width, "out_features": student.dense.out_features, "bias": True,
        "activation_function": "torch.nn.modules.linear.Identity"}, indent=1), encoding="utf-8")
    save_file({"linear.weight": student.dense.weight.detach().contiguous(),
               "linear.bias": student.dense.bias.detach().contiguous()},
              str(out_dir / "2_Dense" / "model.safetensors"))


@torch.no_grad()
def teacher_embeddings(clip_model, clip_tokenizer, texts: list[str], batch_size: int = 256) -> torch.Tensor:
    out = []
    for i in range(0, len(texts), batch_size):
        tokens = _tokenize(clip_tokenizer, texts[i:i + batch_size], clip_model.config.text_config.max_position_embeddings)
        features = clip_model.get_text_features(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"])
        out.append(features if isinstance(features, torch.Tensor) else features.pooler_output)
    return torch.cat(out)


def train_mcs(clip_dir: str | Path, out_dir: str | Path, *, config: str = "world-mcs", scenes: int = 1200,
              steps: int = 800, batch_size: int = 64, lr: float = 1e-3, long_share: float = 0.4, seed: int = 0,
              threads: int = 1,
              log_every: int = 50, tokenizer_scenes: int = 1500) -> dict:
    """Distil world-CLIP's text tower into a multilingual student (MSE, PR-MCS teacher learning)."""
    from transformers import CLIPModel, CLIPTokenizer

    rng, started, cpu_started = _start_run(seed, threads)
    out_dir = Path(out_dir)
    c = _config(config)
    teacher = CLIPModel.from_pretrained(clip_dir).eval()
    teacher_tokenizer = CLIPTokenizer.from_pretrained(clip_dir)
    tokenizer = train_wordpiece(world_corpus(tokenizer_scenes), out_dir, vocab_size=c["vocab_size"],
                                model_max_length=c["positions"])
    descriptions = [d for s in split_scenes("train", scenes) for d in distillation_descriptions(s)]
    english = [realise(d, "en").text for d in descriptions]
    targets = teacher_embeddings(teacher, teacher_tokenizer, english)
    long_pool = [i for i, d in enumerate(descriptions) if d.style == "long"]
    short_pool = [i for i, d in enumerate(descriptions) if d.style == "short"]
    student = build_student(config, tokenizer, targets.shape[1])
    optimizer = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=0.01)
    history = []
    for step in _scheduled_steps(student, optimizer, steps, lr):
        pool = long_pool if long_pool and rng.random() < long_share else short_pool  # same-length batches
        idx = rng.sample(pool, min(batch_size, len(pool)))
        texts = [realise(descriptions[i], rng.choice(LANGUAGES)).text for i in idx]
        tokens = _tokenize(tokenizer, texts, c["positions"])
        loss = nn.functional.mse_loss(student(tokens["input_ids"], tokens["attention_mask"]), targets[idx])
        _optimise(optimizer, student, loss)
        if step % log_every == 0 or step == steps - 1:
            _log_step(history, "world-mcs", "mse", 5, step, steps, loss.item(), started)
    student.eval()
    save_student(student, tokenizer, out_dir, c["positions"])
    meta = {"model": "world-mcs", "config": config, "config_values": c, "teacher": str(clip_dir),
            "train_scenes": scenes, "descriptions": len(descriptions), "languages": list(LANGUAGES),
            "steps": steps, "batch_size": batch_size, "lr": lr, "long_share": long_share, "seed": seed,
            "threads": threads, "loss": "MSE(teacher CLIP text embedding of English, student embedding of the caption in a random language)",
            "history": history, "seconds": round(time.time() - started, 1),
            "cpu_seconds": round(time.process_time() - cpu_started, 1), "torch": torch.__version__}
    (out_dir / "training.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return meta
