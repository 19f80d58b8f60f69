"""The parts a score's key digests (`scoring.fingerprint`), one at a time, on registries written
here: the backbones a metric reads (also through an extra field and a borrowed tokenizer), every
local file they load, CIDEr-D's document frequencies, and a key format that does not drift
(stored scores of users keep their keys across releases)."""
from __future__ import annotations

import os
import re

import pytest

from scoring.api import Scorer
from scoring.fingerprint import _backbones_read, document_frequency_digest, score_fingerprint
from scoring.metrics.coco import CiderDocumentFrequency

# Hub backbones only (no files to stat), so the key is the same on every machine.
HUB_ONLY = '''
[profile]
name = "keys"

[backbones.lender]
kind = "clip"
label = "lends its tokenizer"
hub = "example/clip"
revision = "0123456789abcdef0123456789abcdef01234567"

[backbones.borrower]
kind = "openai-clip"
label = "borrows a tokenizer"
hub = "example/pacs"
revision = "89abcdef0123456789abcdef0123456789abcdef"
tokenizer = "@lender"

[metrics."PAC-S"]
family = "clip-s"
backbone = "borrower"
w = 2.0
prefix = "A photo depicts "

[metrics."PAC-S copy"]
family = "clip-s"
backbone = "borrower"
w = 2.0
prefix = "A photo depicts "

[metrics.BLEU-4]
family = "bleu"
n = 4

[metrics."RefPAC-S"]
family = "refclip-s"
backbone = "borrower"
vision_backbone = "lender"
w = 2.0
'''


def _scorer(tmp_path, text: str, name: str = "keys.toml") -> Scorer:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return Scorer(str(path), device="cpu")


def test_the_key_format_and_value_do_not_drift(tmp_path):
    """A pinned key: a change to what is digested (or how) makes every stored score of every
    user unreachable, so it must be a deliberate change of this value."""
    scorer = _scorer(tmp_path, HUB_ONLY)
    key = score_fingerprint(scorer, "PAC-S")
    assert re.fullmatch(r"keys:[0-9a-f]{16}", key)
    assert key == "keys:c1bbfdf571bc4011"
    assert score_fingerprint(scorer, "BLEU-4") == "keys:f779272c18cd69e2"


def test_the_display_name_is_not_part_of_the_key(tmp_path):
    scorer = _scorer(tmp_path, HUB_ONLY)
    assert score_fingerprint(scorer, "PAC-S") == score_fingerprint(scorer, "PAC-S copy")


def test_extra_fields_in_another_order_give_the_same_key(tmp_path):
    first = HUB_ONLY.replace('[metrics.BLEU-4]', '[metrics.X]\nfamily = "bleu"\nn = 2\nalpha = 1\nbeta = 2\n\n'
                                                   '[metrics.BLEU-4]')
    second = HUB_ONLY.replace('[metrics.BLEU-4]', '[metrics.X]\nbeta = 2\nalpha = 1\nn = 2\nfamily = "bleu"\n\n'
                                                    '[metrics.BLEU-4]')
    a, b = _scorer(tmp_path, first, "a.toml"), _scorer(tmp_path, second, "b.toml")
    assert list(a.registry.metrics["X"].extra) != list(b.registry.metrics["X"].extra)  # really another order
    assert score_fingerprint(a, "X").split(":")[1] == score_fingerprint(b, "X").split(":")[1]


def test_a_metric_reads_its_backbone_and_the_one_it_borrows_a_tokenizer_from(tmp_path):
    scorer = _scorer(tmp_path, HUB_ONLY)
    assert _backbones_read(scorer.registry, scorer.registry.metrics["PAC-S"]) == ["borrower", "lender"]
    # The lender is also the vision backbone: read once
    assert _backbones_read(scorer.registry, scorer.registry.metrics["RefPAC-S"]) == ["borrower", "lender"]
    before = score_fingerprint(scorer, "PAC-S")
    moved = _scorer(tmp_path, HUB_ONLY.replace("0123456789abcdef0123456789abcdef01234567", "f" * 40), "moved.toml")
    assert score_fingerprint(moved, "PAC-S") != before  # only the lender's revision changed


def test_caplens_r_reads_each_backbone_once_across_extra_fields_and_tokenizers():
    scorer = Scorer("world", device="cpu")
    read = _backbones_read(scorer.registry, scorer.registry.metrics["CapLens-R"])
    assert read == ["caplens-r-head", "clip", "mclip-text", "caplens-r-cross"]


def _local(tmp_path) -> str:
    """A backbone loading a checkpoint folder, a tokenizer folder and a separate head file."""
    for folder, name in (("weights", "model.bin"), ("weights/sub", "config.json"), ("tok", "vocab.txt")):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / name).write_text("x")
    (tmp_path / "head.pt").write_text("h")
    return f'''
[profile]
name = "local"

[backbones.local]
kind = "clip"
label = "local files"
path = "{tmp_path / 'weights'}"
tokenizer = "{tmp_path / 'tok'}"
head_file = "{tmp_path / 'head.pt'}"

[metrics."CLIP-S"]
family = "clip-s"
backbone = "local"
w = 2.5
'''


@pytest.mark.parametrize("changed", ["weights/model.bin", "weights/sub/config.json", "tok/vocab.txt", "head.pt"])
def test_each_local_file_a_backbone_loads_is_in_the_key(tmp_path, changed):
    """Retrained in place: a file under the checkpoint folder (at any depth), the tokenizer
    folder or the head file gets a new size or time, and the key changes."""
    text = _local(tmp_path)
    before = score_fingerprint(_scorer(tmp_path, text), "CLIP-S")
    assert score_fingerprint(_scorer(tmp_path, text), "CLIP-S") == before
    path = tmp_path / changed
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert score_fingerprint(_scorer(tmp_path, text), "CLIP-S") != before


def test_a_single_file_checkpoint_is_in_the_key(tmp_path):
    (tmp_path / "one.pt").write_text("w")
    text = f'''
[profile]
name = "file"

[backbones.one]
kind = "openai-clip"
label = "one file"
path = "{tmp_path / 'one.pt'}"

[metrics."PAC-S"]
family = "clip-s"
backbone = "one"
w = 2.0
'''
    before = score_fingerprint(_scorer(tmp_path, text), "PAC-S")
    (tmp_path / "one.pt").write_text("retrained")
    assert score_fingerprint(_scorer(tmp_path, text), "PAC-S") != before


def test_document_frequency_digest_counts_the_reference_sets_too():
    one, two = CiderDocumentFrequency(), CiderDocumentFrequency()
    one.add(["a cat"])
    two.add(["a cat"])
    assert document_frequency_digest(one) == document_frequency_digest(two)
    two.reference_sets += 1  # same n-gram counts, another number of reference sets: another IDF
    assert document_frequency_digest(one) != document_frequency_digest(two)
    # Pinned, like the keys above: stored CIDEr-D scores are found again by this digest.
    assert document_frequency_digest(one) == "54288cb95eaba7753fdbe91f8b050b17e5207118"


def test_a_caplens_r_head_that_names_its_own_towers_has_them_in_its_key(tmp_path):
    """A registry row that names only the head: the metric then reads the towers the head's
    caplens_r.json names, so those are in the key too (a retrained cross-encoder gets a new one)."""
    import json

    head = tmp_path / "head"
    head.mkdir()
    (head / "caplens_r.json").write_text(json.dumps({
        "mode": "frozen", "text_backbone": "text", "vision_backbone": "vision", "cross_backbone": "cross"}))
    row = f'''
[profile]
name = "heads"

[backbones.head]
kind = "caplens-r"
label = "a head folder"
path = "{head}"
''' + "".join(f'''
[backbones.{name}]
kind = "{kind}"
label = "{name}"
hub = "example/{name}"
revision = "{'a' * 40}"
''' for name, kind in (("text", "st-text"), ("vision", "clip"), ("cross", "blip-itm"))) + '''
[metrics."CapLens-R"]
family = "caplens-r"
backbone = "head"
'''
    scorer = _scorer(tmp_path, row)
    assert _backbones_read(scorer.registry, scorer.registry.metrics["CapLens-R"]) == ["head", "text", "vision", "cross"]
    before = score_fingerprint(scorer, "CapLens-R")
    moved = row.replace('hub = "example/cross"\nrevision = "' + "a" * 40, 'hub = "example/cross"\nrevision = "' + "b" * 40)
    assert moved != row
    assert score_fingerprint(_scorer(tmp_path, moved, "moved.toml"), "CapLens-R") != before
    for damaged in ("{not json", '["text", "vision"]'):  # such a head cannot load: nothing more is read
        (head / "caplens_r.json").write_text(damaged)
        assert _backbones_read(_scorer(tmp_path, row, "again.toml").registry,
                               scorer.registry.metrics["CapLens-R"]) == ["head"]
