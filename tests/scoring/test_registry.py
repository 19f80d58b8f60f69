"""The registry: profiles as TOML data, path resolution, ${VAR} expansion, overrides."""
from __future__ import annotations

from pathlib import Path

import pytest

from scoring.api import metric_names
from scoring.registry import RegistryError, available_profiles, expand_vars, load_registry

EXPECTED = [
    "CLIP-S", "RefCLIP-S", "PAC-S", "RefPAC-S", "MCS", "PR-MCS", "SPECS", "UMIC-C", "UMIC",
    "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "SPICE",
]


def test_shipped_profiles_have_every_metric_with_spec_constants():
    assert {"hub", "tiny"} <= set(available_profiles())
    for profile in ("hub", "tiny"):
        registry = load_registry(profile)
        assert list(registry.metrics) == EXPECTED
        m = registry.metrics
        assert (m["CLIP-S"].w, m["CLIP-S"].prefix) == (2.5, "A photo depicts ")
        assert (m["PAC-S"].w, m["RefPAC-S"].w, m["MCS"].w, m["PR-MCS"].w, m["SPECS"].w) == (2.0, 2.0, 2.5, 2.5, 1.0)
        assert m["MCS"].prefix == "" and m["SPECS"].prefix == ""
        assert m["MCS"].vision_backbone == m["CLIP-S"].backbone
    hub = load_registry("hub")
    assert hub.backbones["clip"].hub == "openai/clip-vit-base-patch32"
    assert hub.backbones["mclip-text"].hub == "sentence-transformers/clip-ViT-B-32-multilingual-v1"
    assert hub.backbones["blip-itm"].hub == "Salesforce/blip-itm-base-coco"
    assert hub.backbones["pacs"].kind == "openai-clip" and hub.backbones["specs"].kind == "longclip"
    assert metric_names("tiny") == EXPECTED


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


PROFILE = '''
[backbones.clip]
kind = "clip"
path = "models/clip"

[backbones.pacs]
kind = "openai-clip"
path = "${MY_MODELS:-fallback}/pacs.pth"
tokenizer = "@clip"

[metrics."CLIP-S"]
family = "clip-s"
backbone = "clip"
w = 2.5

[metrics."PAC-S"]
family = "clip-s"
backbone = "pacs"
w = 2.0
'''


def test_paths_resolve_relative_to_the_toml_and_expand_variables(tmp_path, monkeypatch):
    profile = _write(tmp_path / "profiles" / "mine.toml", PROFILE)
    monkeypatch.delenv("MY_MODELS", raising=False)
    registry = load_registry(profile)
    assert registry.profile == "mine"
    assert registry.backbones["clip"].path == tmp_path / "profiles" / "models" / "clip"
    assert registry.backbones["pacs"].path == tmp_path / "profiles" / "fallback" / "pacs.pth"
    assert registry.backbones["pacs"].tokenizer == "@clip"
    monkeypatch.setenv("MY_MODELS", "/abs/models")
    assert load_registry(profile).backbones["pacs"].path == Path("/abs/models/pacs.pth")


def test_environment_overrides(tmp_path, monkeypatch):
    profile = _write(tmp_path / "mine.toml", PROFILE)
    monkeypatch.setenv("CAPLENS_REGISTRY_PAC_S_W", "3.5")
    monkeypatch.setenv("CAPLENS_REGISTRY_CLIP_S_PREFIX", "An image of ")
    monkeypatch.setenv("CAPLENS_REGISTRY_PACS_PATH", "/elsewhere/p.pth")
    monkeypatch.setenv("CAPLENS_REGISTRY_CLIP_MAX_TOKENS", "32")
    registry = load_registry(profile)
    assert registry.metrics["PAC-S"].w == 3.5
    assert registry.metrics["CLIP-S"].prefix == "An image of "
    assert registry.backbones["pacs"].path == Path("/elsewhere/p.pth")
    assert registry.backbones["clip"].max_tokens == 32


def test_config_file_overrides(tmp_path, monkeypatch):
    profile = _write(tmp_path / "mine.toml", PROFILE)
    config = _write(tmp_path / "conf" / "registry.toml", '''
[metrics."CLIP-S"]
w = 1.0

[profiles.mine.backbones.clip]
path = "local-clip"

[profiles.other.metrics."PAC-S"]
w = 9.0
''')
    monkeypatch.setenv("CAPLENS_REGISTRY_CONFIG", str(config))
    registry = load_registry(profile)
    assert registry.metrics["CLIP-S"].w == 1.0
    assert registry.metrics["PAC-S"].w == 2.0
    assert registry.backbones["clip"].path == tmp_path / "conf" / "local-clip"


def test_config_file_in_data_dir_is_picked_up(tmp_path, monkeypatch):
    monkeypatch.delenv("CAPLENS_REGISTRY_CONFIG", raising=False)
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(tmp_path / "data"))
    _write(tmp_path / "data" / "registry.toml", '[metrics."CLIP-S"]\nprefix = ""\n')
    assert load_registry("hub").metrics["CLIP-S"].prefix == ""


@pytest.mark.parametrize("text,match", [
    ('[backbones.x]\nkind = "nope"\npath = "a"\n', "kind"),
    ('[backbones.x]\nkind = "clip"\n', "needs `path` or `hub`"),
    ('[metrics.M]\nfamily = "clip-s"\nbackbone = "missing"\n', "unknown backbone"),
    ('[metrics.M]\nfamily = "magic"\n', "family"),
    ("not = [valid toml", "invalid TOML"),
])
def test_malformed_profiles_are_clear_errors(tmp_path, text, match):
    with pytest.raises(RegistryError, match=match):
        load_registry(_write(tmp_path / "bad.toml", text))


def test_unknown_profile_and_unset_variable(monkeypatch):
    with pytest.raises(RegistryError, match="unknown profile"):
        load_registry("no-such-profile")
    monkeypatch.delenv("SURELY_UNSET_VAR", raising=False)
    with pytest.raises(RegistryError, match="SURELY_UNSET_VAR"):
        expand_vars("${SURELY_UNSET_VAR}/x")
    monkeypatch.setenv("CAPLENS_DATA_DIR", "/data")
    assert expand_vars("${CAPLENS_DATA_DIR}/c") == "/data/c"
    monkeypatch.delenv("CAPLENS_TINY_DIR", raising=False)
    assert expand_vars("${CAPLENS_TINY_DIR}") == "/data/tiny-checkpoints"


def test_metric_names_are_case_insensitive(tiny_scorer):
    assert tiny_scorer.canonical_name("refclip-s") == "RefCLIP-S"
    assert tiny_scorer.canonical_name(" cider ") == "CIDEr"
    assert tiny_scorer.canonical_name("CIDEr-D") == "CIDEr"  # the docs' and the papers' name for it
    with pytest.raises(LookupError):
        tiny_scorer.canonical_name("CLIPS")
    with pytest.raises(LookupError, match="unknown metric 'BLEU-D'"):
        tiny_scorer.canonical_name("BLEU-D")


def test_metric_behaviour_follows_registry_data_not_display_names(tmp_path):
    """Renaming rows changes nothing but their names: the variant field picks the paper."""
    from scoring.api import Scorer

    original = (Path(__file__).resolve().parents[2] / "scoring" / "registry" / "tiny.toml").read_text()
    renamed = original
    for old, new in [('"PAC-S"', '"Positive-Augmented"'), ('"RefPAC-S"', '"With-References"'),
                     ('"PR-MCS"', '"Robust-Multilingual"'), ("metrics.UMIC]", 'metrics."Tuned-ITM"]')]:
        assert old in renamed
        renamed = renamed.replace(old, new)
    shipped, moved = Scorer("tiny"), Scorer(_write(tmp_path / "renamed.toml", renamed))
    for old, new in [("PAC-S", "Positive-Augmented"), ("RefPAC-S", "With-References"),
                     ("PR-MCS", "Robust-Multilingual"), ("UMIC", "Tuned-ITM")]:
        before, after = shipped.info(old), moved.info(new)
        assert (after.description, after.citation, after.range) == (before.description, before.citation, before.range)
    assert "Sarto et al." in moved.info("Positive-Augmented").citation
    assert "Harmonic mean of PAC-S" in moved.info("With-References").description
    assert "PR-MCS fine-tuned" in moved.info("Robust-Multilingual").description
    assert "fine-tuned with UMIC's ranking loss" in moved.info("Tuned-ITM").description
    assert "pre-trained head" in moved.info("UMIC-C").description
    with pytest.raises(RegistryError, match="variant"):
        load_registry(_write(tmp_path / "bad.toml", '[metrics.M]\nfamily = "mcs"\nvariant = "pacs"\n'))
