"""Token ids come from the fast tokenizer's own batch call (no per-text dictionaries in Python)
and equal what transformers' tokenizer call gives, whatever an earlier call set."""
from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer

from scoring.backbones import text

WORLD = Path(__file__).resolve().parents[2] / "scoring" / "world" / "checkpoints"
TEXTS = [
    "A photo depicts a dog running on the grass.",
    "",
    "  two   spaces and a tab\there ",
    "<|endoftext|> inside a caption, and [SEP] and [CLS] too",
    "Ein Hund läuft über die Wiese; un perro corre. 犬が走っている 🐕",
    "CAPITALS, punctuation!!! and numbers 1,024 and 3.14",
    " ".join(["word"] * 120),
]


def _tokenizers(tiny_dir: Path):
    return {
        "tiny clip (BPE)": AutoTokenizer.from_pretrained(tiny_dir / "clip"),
        "world clip": AutoTokenizer.from_pretrained(WORLD / "world-clip"),
        "world mcs (WordPiece)": AutoTokenizer.from_pretrained(WORLD / "world-mcs"),
        "world itm (BERT)": AutoTokenizer.from_pretrained(WORLD / "world-itm"),
    }


def test_ids_equal_the_tokenizer_call_for_every_kind_of_tokenizer(tiny_dir):
    for name, tokenizer in _tokenizers(tiny_dir).items():
        assert tokenizer.backend_tokenizer is not None, name  # the fast path is the one tested
        expected = [list(ids) for ids in tokenizer(TEXTS, add_special_tokens=True, truncation=False)["input_ids"]]
        assert text.encode_ids(tokenizer, TEXTS) == expected, name
        assert max(map(len, expected)) > 100  # the long text is not cut


def test_an_earlier_padded_truncating_call_does_not_leak_into_the_ids(tiny_dir):
    tokenizer = _tokenizers(tiny_dir)["world mcs (WordPiece)"]
    expected = [list(ids) for ids in tokenizer(TEXTS, add_special_tokens=True, truncation=False)["input_ids"]]
    tokenizer(TEXTS, padding="max_length", truncation=True, max_length=6)  # leaves the backend set to pad and cut
    tokenizer.split_special_tokens = True
    assert text.encode_ids(tokenizer, TEXTS[3:4]) == [
        list(tokenizer(TEXTS[3:4], add_special_tokens=True, truncation=False)["input_ids"][0])]
    tokenizer.split_special_tokens = False
    assert text.encode_ids(tokenizer, TEXTS) == expected


def test_a_tokenizer_without_a_rust_backend_takes_the_usual_call():
    class Slow:
        calls = 0

        def __call__(self, texts, add_special_tokens, truncation):
            Slow.calls += 1
            assert add_special_tokens and truncation is False
            return {"input_ids": [(1, len(t), 2) for t in texts]}

    assert text.encode_ids(Slow(), ["ab", "abcd"]) == [[1, 2, 2], [1, 4, 2]] and Slow.calls == 1


def test_token_ids_are_cached_per_tokenizer_and_text(tiny_dir, monkeypatch):
    tokenizer = _tokenizers(tiny_dir)["tiny clip (BPE)"]
    text.TOKEN_CACHE.clear()
    asked = []
    original = text.encode_ids
    monkeypatch.setattr(text, "encode_ids", lambda tok, texts: asked.append(list(texts)) or original(tok, texts))
    first = text.token_ids(tokenizer, ["a dog", "a cat", "a dog"])
    second = text.token_ids(tokenizer, ["a cat", "a bird"])
    assert asked == [["a dog", "a cat"], ["a bird"]]
    assert first[0] == first[2] and second[0] == first[1] and first[0] != first[1]
