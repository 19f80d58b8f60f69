"""`caplens perturb` prints the specified JSON and fails clearly on bad input."""
import json

from app.cli import main
from scoring.perturb.examples import PRMCS_FIGURES
from scoring.perturb.ops import PRMCS_OPS

KEYS = {"text", "op", "p", "seed", "lang", "parent", "changed_spans", "noop"}


def run(capsys, *argv):
    code = main(["perturb", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_one_operation_prints_one_object(capsys):
    caption = PRMCS_FIGURES["en"].caption
    code, out, _ = run(capsys, "--op", "masking", "--p", "0.5", "--seed", "3", caption)
    assert code == 0
    data = json.loads(out)
    assert KEYS <= set(data)
    assert data["op"] == "masking" and data["p"] == 0.5 and data["seed"] == 3
    assert data["lang"] == "en" and data["parent"] == caption and data["noop"] is False
    assert all(data["text"][s:e].startswith("[MASK]") for s, e in data["changed_spans"])


def test_all_prints_the_five_prmcs_operations(capsys):
    example = PRMCS_FIGURES["ja"]
    code, out, _ = run(
        capsys, "--op", "all", "--lang", "ja", "--seed", str(example.substitution_seed),
        "--critical", ";".join(example.critical), example.caption,
    )
    assert code == 0
    data = json.loads(out)
    assert [item["op"] for item in data] == list(PRMCS_OPS)
    assert data[-1]["text"] == example.substitution
    assert "無地" in out  # written as UTF-8, not \\u escapes


def test_detail_units(capsys):
    code, out, _ = run(capsys, "--detail-units", "A dog runs on a beach, and a boy throws a ball.")
    assert code == 0
    units = json.loads(out)
    assert "".join(units) == "A dog runs on a beach, and a boy throws a ball." and len(units) >= 2


def test_keyword_substitution_reads_a_corpus(capsys, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat sleeps on a sofa\na horse stands in a field\n", encoding="utf-8")
    code, out, _ = run(capsys, "--op", "keyword-substitution", "--corpus", str(corpus), "--seed", "1", "a dog runs on a beach")
    assert code == 0
    data = json.loads(out)
    assert data["op"] == "keyword-substitution" and data["p"] == 0.3
    assert data["text"] != data["parent"]


def test_empty_text_is_an_error(capsys):
    code, out, err = run(capsys, "--op", "jumble", "   ")
    assert code == 2 and out == ""
    assert "empty" in err


def test_unknown_operation_and_missing_tagger_are_errors(capsys):
    code, _, err = run(capsys, "--op", "scramble", "a dog")
    assert code == 2 and "unknown operation" in err
    code, _, err = run(capsys, "--op", "keyword-substitution", "--lang", "ko", "개가 달린다")
    assert code == 2 and "unavailable for ko" in err


def test_permutation_is_jumbles_alias(capsys):
    code, out, _ = run(capsys, "--op", "permutation", "--seed", "3", "a dog runs on the grass")
    code_jumble, out_jumble, _ = run(capsys, "--op", "jumble", "--seed", "3", "a dog runs on the grass")
    assert code == code_jumble == 0
    assert json.loads(out) == json.loads(out_jumble) and json.loads(out)["op"] == "jumble"


def test_the_language_is_checked_and_auto_detects_it(capsys):
    caption = PRMCS_FIGURES["de"].caption
    code, out, _ = run(capsys, "--op", "masking", "--lang", "auto", caption)
    assert code == 0 and json.loads(out)["lang"] == "de"
    code, out, _ = run(capsys, "--op", "masking", "--lang", "DE", caption)
    assert code == 0 and json.loads(out)["lang"] == "de"
    code, out, err = run(capsys, "--op", "masking", "--lang", "xx", caption)
    assert code == 2 and out == ""
    assert err.startswith("caplens perturb: error: unknown language code 'xx': give a two-letter ISO 639-1 code")


def test_json_is_indented_at_a_terminal_and_one_line_in_a_pipe(capsys, monkeypatch):
    import sys

    code, piped, _ = run(capsys, "--op", "masking", "--seed", "3", "a man rides a horse")
    assert code == 0 and piped.count("\n") == 1
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, shown, _ = run(capsys, "--op", "masking", "--seed", "3", "a man rides a horse")
    assert code == 0 and shown.startswith('{\n  "text": ') and json.loads(shown) == json.loads(piped)
