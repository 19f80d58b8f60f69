"""A CLIP-style byte-level BPE tokenizer trained on the world's own text in five languages.

Same normaliser, pre-tokeniser and end-of-word marker as the CLIP tokenizer, saved with
`CLIPTokenizer.save_pretrained`, so `CLIPTokenizer` / `AutoTokenizer.from_pretrained` load it
like any hub tokenizer, with no download.
"""
from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path

from .captions import describe_short, realise, scene_captions
from .errors import candidates_for
from .grammar import LANGUAGES
from .scene import generate_scenes

BOS, EOS = "<|startoftext|>", "<|endoftext|>"
CLIP_PREFIX = "A photo depicts "  # CLIP-S and PAC-S prepend this to candidates
# The CLIP tokenizer's pre-tokenisation pattern (words, single digits, punctuation runs).
CLIP_SPLIT = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""


def world_corpus(scenes: int = 1500, first_seed: int = 0) -> Iterator[str]:
    """Captions, erroneous candidates and damaged captions in every language, plus the CLIP prefix."""
    yield CLIP_PREFIX.strip()
    for scene in generate_scenes(first_seed, scenes):
        caps = scene_captions(scene)
        for per_lang in caps.values():
            for cap in per_lang.values():
                yield cap.text
        description = caps["long" if "long" in caps else "short"]["en"].description
        for cand in candidates_for(scene, description, LANGUAGES):
            yield cand.text
        yield realise(describe_short(scene, random.Random(scene.seed)), "en").text


def train_tokenizer(texts: Iterable[str], out_dir: str | Path, vocab_size: int = 3000, model_max_length: int = 77):
    """Train BPE on `texts` and save it as a CLIPTokenizer folder; returns the loaded tokenizer."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import CLIPTokenizer

    bpe = Tokenizer(models.BPE(unk_token=EOS, end_of_word_suffix="</w>", continuing_subword_prefix=""))
    bpe.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()])
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CLIP_SPLIT), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS], initial_alphabet=alphabet,
                                  end_of_word_suffix="</w>", show_progress=False)
    bpe.train_from_iterator(texts, trainer)
    vocab = dict(bpe.get_vocab())
    # Every byte, alone and word-final, stays encodable (as in CLIP's own vocabulary).
    for symbol in sorted(alphabet) + sorted(a + "</w>" for a in alphabet):
        vocab.setdefault(symbol, len(vocab))
    # The trained merges, read from the tokenizer's serialised form (pairs, or "a b" strings in older versions).
    merges = [tuple(pair.split(" ")) if isinstance(pair, str) else tuple(pair)
              for pair in json.loads(bpe.to_str())["model"]["merges"]]
    tokenizer = CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=model_max_length)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return CLIPTokenizer.from_pretrained(out_dir)


def train_wordpiece(texts: Iterable[str], out_dir: str | Path, vocab_size: int = 3000, model_max_length: int = 256):
    """Train a BERT WordPiece tokenizer (the multilingual student's) and save it as a BertTokenizer folder.

    BERT's normaliser splits CJK ideographs into single characters, so Japanese (which has
    no spaces) still gets word-like pieces.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizer

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    wordpiece.train_from_iterator(texts, trainer)
    tokenizer = BertTokenizer(vocab=wordpiece.get_vocab(), do_lower_case=True, strip_accents=False,
                              model_max_length=model_max_length)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return BertTokenizer.from_pretrained(out_dir)
