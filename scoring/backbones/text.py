"""Tokenisation with an explicit token limit: over-long captions are cut and flagged."""
from __future__ import annotations

import torch


def tokenize_truncating(tokenizer, texts: list[str], limit: int) -> tuple[torch.Tensor, torch.Tensor, list[bool]]:
    """Token ids and attention mask padded to the longest text, at most ``limit`` tokens.

    A text longer than the limit keeps its first ``limit - 1`` tokens and its closing special
    token (end-of-text / [SEP]), which is what ``truncation=True`` does; the flag says it
    happened, so the UI can show that the score saw a shortened caption.
    """
    encoded = tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rows, flags = [], []
    for ids in encoded:
        cut = len(ids) > limit
        if cut:
            ids = list(ids[: limit - 1]) + [ids[-1]]
        rows.append(ids)
        flags.append(cut)
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, ids in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention[i, : len(ids)] = 1
    return input_ids, attention, flags


def quiet_length_warnings(tokenizer) -> None:
    """The limit is enforced by tokenize_truncating; stop the tokenizer warning about it."""
    tokenizer.model_max_length = 1_000_000
