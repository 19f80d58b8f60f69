"""Hub-sized random checkpoints for timing: the `bench` registry profile.

The same builders as :mod:`scoring.tiny` (same folder layouts, loaded by the same code as
the hub checkpoints), at the published architectures' sizes, so benchmark timings mean
what they would with the real weights, without any download:

* CLIP ViT-B/32 (224 px, 12+12 layers, 512-d projection): CLIP-S, RefCLIP-S, PAC-S, RefPAC-S
  and the MCS image tower;
* the SPECS model: the same towers with LongCLIP's 248 text positions;
* the MCS text student: multilingual DistilBERT (6 layers, 768 wide, 119,547-token
  vocabulary) with mean pooling and a 768->512 dense layer, as
  sentence-transformers/clip-ViT-B-32-multilingual-v1 (MCS and PR-MCS);
* the ITM cross-encoder: BLIP base (ViT-B/16 at 384 px, 12-layer BERT with cross-attention),
  as Salesforce/blip-itm-base-coco (UMIC-C and UMIC).

PAC-S and PR-MCS / UMIC load the CLIP, text-student and ITM folders a second time as their
own model instances (same sizes, so the same cost). Weights are random and saved in fp16
(as the published CLIP checkpoint is); scores mean nothing.

    python -m scoring.bench [FOLDER]      # build (default: $CAPLENS_BENCH_DIR)
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from scoring.registry import bench_dir
from scoring.tiny import (
    build_blip_itm_folder, build_clip_folder, build_clip_tokenizer, build_st_text_folder, build_staged,
    build_wordpiece_tokenizer, ensure_built,
)

SEED = 4321
FORMAT_VERSION = "1"
LONGCLIP_POSITIONS = 248
MULTILINGUAL_VOCAB = 119547  # distilbert-base-multilingual-cased
BERT_VOCAB = 30524  # BLIP's bert-base-uncased plus its added tokens
CLIP_PROJECTION = 512



def clip_config(text_positions: int = 77):
    """ViT-B/32 CLIP (transformers' CLIPConfig defaults) with the local tokenizer's ids."""
    from transformers import CLIPConfig

    tokenizer = build_clip_tokenizer()
    return CLIPConfig(
        text_config=dict(
            max_position_embeddings=text_positions, eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.eos_token_id,
        ),
        projection_dim=CLIP_PROJECTION,
    )


def text_student_config():
    """Multilingual DistilBERT base, as in the MCS text student."""
    from transformers import DistilBertConfig

    tokenizer = build_wordpiece_tokenizer("distilbert")
    return DistilBertConfig(
        vocab_size=MULTILINGUAL_VOCAB, dim=768, n_layers=6, n_heads=12, hidden_dim=3072,
        max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
    )


def itm_config():
    """BLIP base ITM: ViT-B/16 at 384 px and a 12-layer BERT with cross-attention."""
    from transformers import BlipConfig

    tokenizer = build_wordpiece_tokenizer("bert")
    return BlipConfig(
        text_config=dict(
            vocab_size=BERT_VOCAB, pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
        ),
        vision_config=dict(image_size=384, patch_size=16),
    )


def _write_bench(staging: Path) -> None:
    build_clip_folder(staging / "clip", SEED, clip_config(), dtype=torch.float16)
    build_clip_folder(staging / "specs", SEED + 20, clip_config(LONGCLIP_POSITIONS), dtype=torch.float16)
    build_st_text_folder(staging / "text-student", SEED + 30, text_student_config(), CLIP_PROJECTION, torch.float16)
    build_blip_itm_folder(staging / "itm", SEED + 50, itm_config(), dtype=torch.float16)


def build_bench_checkpoints(folder: str | Path | None = None) -> Path:
    """Write the bench checkpoints into ``folder`` (default: $CAPLENS_BENCH_DIR)."""
    return build_staged(Path(folder) if folder is not None else bench_dir(), _write_bench, FORMAT_VERSION)


def ensure_bench_checkpoints(folder: str | Path | None = None) -> Path:
    """Build the bench checkpoints unless an up-to-date set is already there (about 1.3 GB)."""
    return ensure_built(Path(folder) if folder is not None else bench_dir(), _write_bench, FORMAT_VERSION)


if __name__ == "__main__":
    print(build_bench_checkpoints(sys.argv[1] if len(sys.argv) > 1 else None))
