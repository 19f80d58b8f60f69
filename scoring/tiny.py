"""Tiny, deterministic, randomly initialised checkpoints for every backbone kind.

They are written in exactly the formats the real checkpoints come in (docs/scoring.md),
tokenizers included (built here from a small word list, no download), so tests and offline
smoke runs exercise the same loading code as the hub profile.  Building all of them takes a
few seconds on a CPU.  Scores computed with them are meaningless.

    python -m scoring.tiny [FOLDER]      # build (default: $CAPLENS_TINY_DIR)
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

import torch

from scoring.registry import tiny_dir

SEED = 1234
TEXT_WIDTH = 128  # two attention heads under OpenAI's width // 64 rule
VISION_WIDTH = 128
LAYERS = 2
PATCH = 8
IMAGE_SIZE = 32
EMBED_DIM = 64
ST_WIDTH = 64
FORMAT_VERSION = "2"  # bump when the layout changes, so stale folders get rebuilt

# Words that get whole-word tokens; anything else falls back to characters / bytes.
WORDS = (
    "a an the of in on at with and is are to from by for photo depicts picture image "
    "dog dogs cat cats man woman person people child boy girl bird horse cow sheep car bus "
    "bike bicycle train truck boat plane street road city field grass tree trees water beach "
    "sky table chair kitchen room house wall window door red blue green yellow white black "
    "brown small large big little two three sitting standing walking running riding playing "
    "eating holding looking next near under over front side top left right circle square "
    "triangle shape shapes background colour color"
).split()
MULTILINGUAL_WORDS = (
    "ein eine der die das hund katze rot blau un une le la chien chat rouge bleu el los perro "
    "gato rojo azul 犬 猫 赤 青 の が に を 写真"
).split()

_build_lock = threading.Lock()


def _bytes_to_unicode() -> dict[int, str]:
    """Byte-level BPE alphabet: printable bytes map to themselves, the rest to U+0100…"""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


def build_clip_tokenizer():
    """Byte-level BPE CLIP tokenizer; end-of-text gets the largest id, as in OpenAI CLIP."""
    from transformers import CLIPTokenizer

    alphabet = list(_bytes_to_unicode().values())
    vocab: dict[str, int] = {}
    for symbol in alphabet + [s + "</w>" for s in alphabet]:
        vocab.setdefault(symbol, len(vocab))
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        symbols = list(word[:-1]) + [word[-1] + "</w>"]
        while len(symbols) > 1:
            pair = (symbols[0], symbols[1])
            merged = pair[0] + pair[1]
            if pair not in merges:
                merges.append(pair)
            vocab.setdefault(merged, len(vocab))
            symbols = [merged] + symbols[2:]
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=merges)


def _wordpiece_vocab(words) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]:
        vocab[token] = len(vocab)
    chars = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'\"-:;()äöüéèàçñß"
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault("##" + ch, len(vocab))
    for word in words:
        for ch in word:
            vocab.setdefault(ch, len(vocab))
        vocab.setdefault(word, len(vocab))
    return vocab


def build_wordpiece_tokenizer(kind: str = "bert"):
    """Lower-casing WordPiece tokenizer (BERT for BLIP, DistilBERT for the text encoder)."""
    from transformers import BertTokenizer, DistilBertTokenizer

    vocab = _wordpiece_vocab(WORDS + MULTILINGUAL_WORDS)
    cls = DistilBertTokenizer if kind == "distilbert" else BertTokenizer
    return cls(vocab=vocab, do_lower_case=True)


def _clip_config(vocab_size: int, eos: int, bos: int):
    from transformers import CLIPConfig

    return CLIPConfig(
        text_config=dict(
            vocab_size=vocab_size, hidden_size=TEXT_WIDTH, intermediate_size=4 * TEXT_WIDTH,
            num_hidden_layers=LAYERS, num_attention_heads=TEXT_WIDTH // 64, max_position_embeddings=77,
            hidden_act="quick_gelu", eos_token_id=eos, bos_token_id=bos, pad_token_id=eos,
            projection_dim=EMBED_DIM,
        ),
        vision_config=dict(
            hidden_size=VISION_WIDTH, intermediate_size=4 * VISION_WIDTH, num_hidden_layers=LAYERS,
            num_attention_heads=VISION_WIDTH // 64, image_size=IMAGE_SIZE, patch_size=PATCH,
            hidden_act="quick_gelu", projection_dim=EMBED_DIM,
        ),
        projection_dim=EMBED_DIM,
    )


def _clip_image_processor(size: int = IMAGE_SIZE):
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    return CLIPImageProcessorPil(size={"shortest_edge": size}, crop_size={"height": size, "width": size})


def _save(model, folder: Path, dtype: torch.dtype | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (model.to(dtype) if dtype is not None else model).save_pretrained(folder)


def build_clip_folder(folder: Path, seed: int = SEED, config=None, dtype: torch.dtype | None = None) -> Path:
    """transformers CLIPModel folder: config + safetensors + tokenizer + image processor.

    ``config`` (a CLIPConfig) defaults to the tiny sizes; weights are saved in ``dtype``
    (default: as built, float32)."""
    from transformers import CLIPModel

    torch.manual_seed(seed)
    tokenizer = build_clip_tokenizer()
    config = config or _clip_config(len(tokenizer), tokenizer.eos_token_id, tokenizer.bos_token_id)
    _save(CLIPModel(config), folder, dtype)
    tokenizer.save_pretrained(folder)
    _clip_image_processor(config.vision_config.image_size).save_pretrained(folder)
    return folder


def random_openai_state_dict(
    seed: int, vocab_size: int, *, text_positions: int = 77, longclip: bool = False
) -> dict[str, torch.Tensor]:
    """A random state dict with OpenAI CLIP's ViT key layout (LongCLIP adds
    ``positional_embedding_res``).  Layer norms get non-trivial scales so a wrong key
    mapping shows up in the embeddings."""
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=0.02):
        return torch.randn(*shape, generator=gen) * scale

    def ln(prefix, width):
        return {f"{prefix}.weight": 1 + rnd(width, scale=0.1), f"{prefix}.bias": rnd(width)}

    def blocks(prefix, width, layers):
        out = {}
        for i in range(layers):
            p = f"{prefix}.resblocks.{i}"
            out |= {
                f"{p}.attn.in_proj_weight": rnd(3 * width, width, scale=width ** -0.5),
                f"{p}.attn.in_proj_bias": rnd(3 * width),
                f"{p}.attn.out_proj.weight": rnd(width, width, scale=width ** -0.5),
                f"{p}.attn.out_proj.bias": rnd(width),
                f"{p}.mlp.c_fc.weight": rnd(4 * width, width, scale=width ** -0.5),
                f"{p}.mlp.c_fc.bias": rnd(4 * width),
                f"{p}.mlp.c_proj.weight": rnd(width, 4 * width, scale=(4 * width) ** -0.5),
                f"{p}.mlp.c_proj.bias": rnd(width),
            }
            out |= ln(f"{p}.ln_1", width) | ln(f"{p}.ln_2", width)
        return out

    grid = IMAGE_SIZE // PATCH
    state = {
        "visual.class_embedding": rnd(VISION_WIDTH, scale=VISION_WIDTH ** -0.5),
        "visual.positional_embedding": rnd(grid * grid + 1, VISION_WIDTH, scale=VISION_WIDTH ** -0.5),
        "visual.conv1.weight": rnd(VISION_WIDTH, 3, PATCH, PATCH, scale=0.05),
        "visual.proj": rnd(VISION_WIDTH, EMBED_DIM, scale=VISION_WIDTH ** -0.5),
        "token_embedding.weight": rnd(vocab_size, TEXT_WIDTH),
        "positional_embedding": rnd(text_positions, TEXT_WIDTH, scale=0.01),
        "text_projection": rnd(TEXT_WIDTH, EMBED_DIM, scale=TEXT_WIDTH ** -0.5),
        "logit_scale": torch.tensor(4.6052),
    }
    if longclip:
        state["positional_embedding_res"] = rnd(text_positions, TEXT_WIDTH, scale=0.01)
    state |= ln("visual.ln_pre", VISION_WIDTH) | ln("visual.ln_post", VISION_WIDTH) | ln("ln_final", TEXT_WIDTH)
    state |= blocks("visual.transformer", VISION_WIDTH, LAYERS) | blocks("transformer", TEXT_WIDTH, LAYERS)
    # Both towers' output layer-norm biases project onto one shared direction, so image and
    # text embeddings are partly aligned (cosines of both signs) as in a trained CLIP;
    # fully random towers give cosines around 0 that max(·, 0) mostly clips away.
    shared = torch.randn(EMBED_DIM, generator=gen)
    shared = shared / shared.norm()
    for bias_key, proj_key in (("visual.ln_post.bias", "visual.proj"), ("ln_final.bias", "text_projection")):
        bias = state[bias_key]
        state[proj_key] = state[proj_key] + torch.outer(bias / bias.dot(bias), shared) * 0.8
    return state


def build_st_text_folder(
    folder: Path, seed: int = SEED, config=None, out_features: int = EMBED_DIM, dtype: torch.dtype | None = None
) -> Path:
    """sentence-transformers layout: DistilBERT at the root, mean pooling, identity dense.

    ``config`` (a DistilBertConfig) defaults to the tiny sizes."""
    from safetensors.torch import save_file
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(seed)
    tokenizer = build_wordpiece_tokenizer("distilbert")
    config = config or DistilBertConfig(
        vocab_size=len(tokenizer), dim=ST_WIDTH, n_layers=LAYERS, n_heads=2, hidden_dim=2 * ST_WIDTH,
        max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
    )
    width = config.dim
    _save(DistilBertModel(config), folder, dtype)
    tokenizer.save_pretrained(folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ], indent=2))
    max_seq_length = 64 if config.max_position_embeddings <= 128 else 128
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": width, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }, indent=2))
    (folder / "2_Dense").mkdir(exist_ok=True)
    (folder / "2_Dense" / "config.json").write_text(json.dumps({
        "in_features": width, "out_features": out_features, "bias": False,
        "activation_function": "torch.nn.modules.linear.Identity",
    }, indent=2))
    gen = torch.Generator().manual_seed(seed + 1)
    save_file({"linear.weight": torch.randn(out_features, width, generator=gen) * width ** -0.5},
              str(folder / "2_Dense" / "model.safetensors"))
    return folder


def build_blip_itm_folder(folder: Path, seed: int = SEED, config=None, dtype: torch.dtype | None = None) -> Path:
    """transformers BlipForImageTextRetrieval folder with a BlipProcessor.

    ``config`` (a BlipConfig) defaults to the tiny sizes."""
    from transformers import BlipConfig, BlipForImageTextRetrieval, BlipProcessor
    from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil

    torch.manual_seed(seed)
    tokenizer = build_wordpiece_tokenizer("bert")
    width = 64
    config = config or BlipConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=width, encoder_hidden_size=width, intermediate_size=2 * width,
            num_hidden_layers=LAYERS, num_attention_heads=2, max_position_embeddings=64,
            pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
        ),
        vision_config=dict(
            hidden_size=width, intermediate_size=2 * width, num_hidden_layers=LAYERS, num_attention_heads=2,
            image_size=IMAGE_SIZE, patch_size=PATCH,
        ),
        projection_dim=EMBED_DIM,
    )
    _save(BlipForImageTextRetrieval(config), folder, dtype)
    size = config.vision_config.image_size
    processor = BlipProcessor(
        image_processor=BlipImageProcessorPil(size={"height": size, "width": size}), tokenizer=tokenizer
    )
    processor.save_pretrained(folder)
    return folder


def _write_tiny(staging: Path) -> None:
    build_clip_folder(staging / "clip", SEED)
    vocab_size = len(build_clip_tokenizer())
    (staging / "pacs").mkdir()
    torch.save(random_openai_state_dict(SEED + 10, vocab_size), staging / "pacs" / "clip_tiny.pth")
    (staging / "specs").mkdir()
    torch.save(random_openai_state_dict(SEED + 20, vocab_size, text_positions=248, longclip=True),
               staging / "specs" / "longclip_tiny.pt")
    build_st_text_folder(staging / "mclip-text", SEED + 30)
    build_st_text_folder(staging / "prmcs-text", SEED + 40)
    build_blip_itm_folder(staging / "blip-itm", SEED + 50)
    build_blip_itm_folder(staging / "umic-itm", SEED + 60)


def build_staged(target: Path, write: Callable[[Path], None], version: str) -> Path:
    """Run ``write(folder)`` in a staging folder beside ``target``, stamp ``version`` and
    rename it into place, so a reader (or a second process building at the same time)
    never sees a half-written set."""
    from scoring.backbones import quiet_progress_bars

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        with quiet_progress_bars():
            write(staging)
        (staging / "VERSION").write_text(version)
        if target.exists():
            if is_current(target, version):
                return target  # another process finished first; its set is identical
            stale = Path(tempfile.mkdtemp(prefix=".stale-", dir=target.parent))
            os.replace(target, stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(staging, target)
        except OSError:
            if not is_current(target, version):
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def is_current(folder: Path, version: str) -> bool:
    stamp = folder / "VERSION"
    return stamp.is_file() and stamp.read_text().strip() == version


def build_tiny_checkpoints(folder: str | Path | None = None) -> Path:
    """Write every tiny checkpoint into ``folder`` (default: $CAPLENS_TINY_DIR)."""
    return build_staged(Path(folder) if folder is not None else tiny_dir(), _write_tiny, FORMAT_VERSION)


def ensure_built(target: Path, write: Callable[[Path], None], version: str) -> Path:
    """:func:`build_staged` unless an up-to-date set is already at ``target``."""
    with _build_lock:
        if not is_current(target, version):
            build_staged(target, write, version)
    return target


def ensure_tiny_checkpoints(folder: str | Path | None = None) -> Path:
    """Build the tiny checkpoints unless an up-to-date set is already there."""
    return ensure_built(Path(folder) if folder is not None else tiny_dir(), _write_tiny, FORMAT_VERSION)


if __name__ == "__main__":
    print(build_tiny_checkpoints(sys.argv[1] if len(sys.argv) > 1 else None))
