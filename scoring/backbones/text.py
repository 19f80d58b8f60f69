"""Tokenisation with an explicit token limit: over-long captions are cut and flagged.

Token ids are cached per tokenizer and text (before any limit is applied), so a caption is
tokenised once however many metrics and backbones read it: CLIP-S, PAC-S and SPECS share
CLIP's tokenizer, with limits of 77 and 248 tokens.
"""
from __future__ import annotations

import numpy as np
import torch

from scoring.backbones.graphs import batch_bucket, length_bucket, pad_columns, padded_batch, pads
from scoring.cache import LRUCache
from scoring.pixels import ImagePipeline, PreprocessConfig

TOKEN_CACHE = LRUCache(262144)


def tokenizer_identity(tokenizer) -> str:
    """Tokenizers loaded from the same files share cached ids; in-memory ones do not."""
    source = getattr(tokenizer, "name_or_path", "") or f"object-{id(tokenizer)}"
    return f"{type(tokenizer).__name__}|{source}|{len(tokenizer)}"


def token_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """Full token ids (special tokens included) of each text; each new text tokenised once."""
    identity = tokenizer_identity(tokenizer)
    distinct = list(dict.fromkeys(texts))
    cached = TOKEN_CACHE.get_many([(identity, text) for text in distinct])
    found = {text: ids for text, ids in zip(distinct, cached) if ids is not None}
    missing = [t for t in distinct if t not in found]
    if missing:
        for text, ids in zip(missing, encode_ids(tokenizer, missing)):
            TOKEN_CACHE.put((identity, text), ids)
            found[text] = ids
    return [found[text] for text in texts]


def encode_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """The ids ``tokenizer(texts, add_special_tokens=True, truncation=False)`` gives.

    A fast (Rust) tokenizer is called directly, as transformers would call it after setting it
    to neither pad nor truncate, and without transformers' per-text conversion to Python
    dictionaries, which is Python holding the GIL for as long as the encoding itself takes
    (4,096 captions: 128 of 276 ms on 2 cores) while the image threads wait to launch their work.
    Other tokenizers take the usual call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "encode_batch_fast") or not hasattr(tokenizer, "set_truncation_and_padding"):
        return [list(ids) for ids in tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]]
    from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

    tokenizer.set_truncation_and_padding(
        padding_strategy=PaddingStrategy.DO_NOT_PAD, truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE,
        max_length=None, stride=0, pad_to_multiple_of=None, padding_side=None,
    )
    split = bool(getattr(tokenizer, "split_special_tokens", False))
    if backend.encode_special_tokens != split:
        backend.encode_special_tokens = split
    return [encoding.ids for encoding in backend.encode_batch_fast(texts, add_special_tokens=True)]


def tokenize_truncating(tokenizer, texts: list[str], limit: int) -> tuple[torch.Tensor, torch.Tensor, list[bool]]:
    """Token ids and attention mask padded to the longest text, at most ``limit`` tokens.

    A text longer than the limit keeps its first ``limit - 1`` tokens and its closing special
    token (end-of-text / [SEP]), which is what ``truncation=True`` does; the flag says it
    happened, so the UI can show that the score saw a shortened caption.
    """
    encoded = token_ids(tokenizer, list(texts))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rows, flags = [], []
    for ids in encoded:
        cut = len(ids) > limit
        if cut:
            ids = list(ids[: limit - 1]) + [ids[-1]]
        rows.append(ids)
        flags.append(cut)
    width = max(len(r) for r in rows)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    attention = np.zeros((len(rows), width), dtype=np.int64)
    for i, ids in enumerate(rows):
        input_ids[i, : len(ids)] = ids
        attention[i, : len(ids)] = 1
    return torch.from_numpy(input_ids), torch.from_numpy(attention), flags


def attention_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A (rows, tokens) 0/1 attention mask as the additive (rows, 1, 1, tokens) bias that
    transformers builds from it (0 where a token is seen, the dtype's lowest value where not).
    Handed over ready-made, it is used as it is: transformers checks a 0/1 mask's contents
    first, which waits for the GPU and so cannot be captured in a CUDA graph."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def pad_token_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def padded_for_graph(device: torch.device, ids: torch.Tensor, mask: torch.Tensor, pad: int,
                     limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A small text batch padded to its graph bucket (:mod:`scoring.backbones.graphs`): extra
    tokens and rows are padding with a zero mask, which no real token attends to."""
    if batch_bucket(ids.shape[0]) is None or not pads(device):
        return ids, mask
    width = length_bucket(ids.shape[1], limit)
    return padded_batch(device, pad_columns(ids, width, pad), pad), padded_batch(device, pad_columns(mask, width, 0))


def quiet_length_warnings(tokenizer) -> None:
    """The limit is enforced by tokenize_truncating; stop the tokenizer warning about it."""
    tokenizer.model_max_length = 1_000_000


class TextModelBackbone:
    """What every backbone with a text tower sets up alike: its registry entry, the model on the
    device in the placement's precision, the tokenizer (length warnings quieted, since over-long
    captions are cut and flagged here) and the checkpoint fingerprint its caches are keyed by."""

    def __init__(self, spec, model, tokenizer, placement, print_: str):
        self.spec = spec
        self.label = spec.label
        self.placement = placement
        self.model = model.to(device=placement.device, dtype=placement.dtype).eval()
        self.tokenizer = tokenizer
        quiet_length_warnings(tokenizer)
        self.fingerprint = print_

    def use_image_processor(self, image_processor) -> None:
        """An image tower's recipe: its processor, the preprocessing it implies, the shared pipeline,
        and the text length the model's position table allows."""
        self.image_processor = image_processor
        self.preprocess = PreprocessConfig.of(image_processor)
        self.pipeline = ImagePipeline(self.placement.device)
        limit = self.model.config.text_config.max_position_embeddings
        self.max_tokens = min(self.spec.max_tokens or limit, limit)
