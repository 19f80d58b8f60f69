"""Every shipped profile's metric rows carry the constants of /work/shared/SPEC.md.

The expected values are written out here from SPEC.md, section "Metrics (rows of the score
panel)", not read from any profile: a profile file edited to another w, prefix, variant or scale
(say RefCLIP-S w 2.5 -> 2.0 in `hub`, or CLIP-S w in `world`) fails here, naming the row.
"""
from __future__ import annotations

import numpy as np
import pytest

from scoring.metrics import build_metric
from scoring.registry import METRIC_VARIANTS, available_profiles, load_registry

PREFIX = "A photo depicts "  # SPEC "Metrics": CLIPScore and PAC-S encode candidates as "A photo depicts " + caption
# SPEC "Metrics", the formula column: family, variant (which paper's checkpoint), w, prefix, backbone(s).
#   CLIP-S     2.5 · max(cos(v, t), 0)                                 on CLIP
#   RefCLIP-S  harmonic mean(CLIP-S, max(0, max_r cos(t, r))): CLIP-S's w = 2.5, on CLIP
#   PAC-S      2.0 · max(cos(v, t), 0)                                 on the PAC-S fine-tuned CLIP
#   RefPAC-S   harmonic mean(PAC-S, ...): PAC-S's w = 2.0               on the PAC-S fine-tuned CLIP
#   MCS        2.5 · max(cos(V(I), T(c)), 0), V = CLIP's vision tower, T = multilingual text encoder
#   PR-MCS     same as MCS with the PR-MCS fine-tuned text encoder
#   SPECS      max(cos(v, t), 0): no w, the paper's form (the released code's (cos+1)/2 is the other scale)
#   UMIC-C     P(match) of a pre-trained ITM head; UMIC: one logit on the UMIC-fine-tuned backbone
#   CapLens-R  regression head on frozen backbone features (image, candidate, references)
#   BLEU-1..4, METEOR, ROUGE-L, CIDEr-D, SPICE: the COCO caption toolkit definitions
# Only CLIPScore and PAC-S are given a prefix; w = 1.0 is the registry's "no weight".
EXPECTED = {
    "CLIP-S": dict(family="clip-s", variant="clip", w=2.5, prefix=PREFIX, backbone="clip", vision_backbone=None),
    "RefCLIP-S": dict(family="refclip-s", variant="clip", w=2.5, prefix=PREFIX, backbone="clip", vision_backbone=None),
    "PAC-S": dict(family="clip-s", variant="pacs", w=2.0, prefix=PREFIX, backbone="pacs", vision_backbone=None),
    "RefPAC-S": dict(family="refclip-s", variant="pacs", w=2.0, prefix=PREFIX, backbone="pacs", vision_backbone=None),
    "MCS": dict(family="mcs", variant="mcs", w=2.5, prefix="", backbone="mclip-text", vision_backbone="clip"),
    "PR-MCS": dict(family="mcs", variant="pr-mcs", w=2.5, prefix="", backbone="prmcs-text", vision_backbone="clip"),
    "SPECS": dict(family="specs", variant="", w=1.0, prefix="", scale="paper", backbone="specs", vision_backbone=None),
    "UMIC-C": dict(family="itm", variant="umic-c", w=1.0, prefix="", backbone="blip-itm", vision_backbone=None),
    "UMIC": dict(family="itm", variant="umic", w=1.0, prefix="", backbone="umic-itm", vision_backbone=None),
    # The frozen-feature head is the family's default variant (a cross-encoder is the other).
    "CapLens-R": dict(family="caplens-r", variant=METRIC_VARIANTS.get("caplens-r", ("",))[0], w=1.0, prefix=""),
    **{f"BLEU-{n}": dict(family="bleu", n=n, w=1.0, prefix="") for n in (1, 2, 3, 4)},
    "METEOR": dict(family="meteor", w=1.0, prefix=""),
    "ROUGE-L": dict(family="rouge-l", w=1.0, prefix=""),
    "CIDEr": dict(family="cider", w=1.0, prefix=""),
    "SPICE": dict(family="spice", w=1.0, prefix=""),
}
# SPEC "Metrics", the backbone column: the real checkpoints of the `hub` profile.
HUB_SOURCES = {
    "clip": dict(kind="clip", hub="openai/clip-vit-base-patch32"),
    "mclip-text": dict(kind="st-text", hub="sentence-transformers/clip-ViT-B-32-multilingual-v1"),
    "prmcs-text": dict(kind="st-text"),  # no public weights: made by our PR-MCS recipe
    "pacs": dict(kind="openai-clip", file_name="clip_ViT-B-32.pth"),  # OpenAI-CLIP state-dict format
    "specs": dict(kind="longclip"),  # LongCLIP-B based, 248 text positions
    "blip-itm": dict(kind="blip-itm", hub="Salesforce/blip-itm-base-coco"),
    "umic-itm": dict(kind="blip-itm"),  # the UMIC-C backbone fine-tuned by our UMIC recipe
}
SHIPPED = ["bench", "hub", "tiny", "world"]


def _setting(spec, field: str):
    if field == "scale":  # SPECS reads it from the row's extra fields ("paper" where absent)
        return build_metric(spec).scale
    return getattr(spec, field)


@pytest.fixture(autouse=True)
def shipped_files_only(monkeypatch):
    """The profile files as shipped: no CAPLENS_REGISTRY_* override from the environment."""
    import os

    for variable in [v for v in os.environ if v.startswith("CAPLENS_REGISTRY_")]:
        monkeypatch.delenv(variable)


def test_every_shipped_profile_is_checked():
    assert available_profiles() == SHIPPED


@pytest.mark.parametrize("profile", SHIPPED)
def test_metric_rows_carry_the_constants_of_the_spec(profile):
    registry = load_registry(profile, overrides=[])
    assert set(registry.metrics) <= set(EXPECTED), "a metric row with no SPEC constants here: add them"
    wrong = []
    for name, spec in registry.metrics.items():
        for field, expected in EXPECTED[name].items():
            if _setting(spec, field) != expected:
                wrong.append(f"{profile} {name}: {field} = {_setting(spec, field)!r}, SPEC says {expected!r}")
    assert wrong == []


@pytest.mark.parametrize("profile", SHIPPED)
def test_specs_is_on_the_papers_scale_and_the_weights_act_as_the_spec_says(profile):
    """The rows built into metrics compute SPEC's formulas at cos = 0.6 (and cos < 0 gives 0)."""
    registry = load_registry(profile, overrides=[])
    image = np.array([[1.0, 0.0], [1.0, 0.0]])
    text = np.array([[0.6, 0.8], [-0.6, 0.8]])  # cosines 0.6 and -0.6
    values = {name: build_metric(registry.metrics[name]).pair_scores(image, text)
              for name in ("CLIP-S", "PAC-S", "SPECS")}
    assert values["CLIP-S"] == pytest.approx([2.5 * 0.6, 0.0])
    assert values["PAC-S"] == pytest.approx([2.0 * 0.6, 0.0])
    assert values["SPECS"] == pytest.approx([0.6, 0.0])  # max(cos, 0), not (cos + 1) / 2
    assert build_metric(registry.metrics["SPECS"]).scale == "paper"


def test_hub_backbones_are_the_checkpoints_of_the_spec():
    backbones = load_registry("hub", overrides=[]).backbones
    assert set(backbones) == set(HUB_SOURCES)
    for name, expected in HUB_SOURCES.items():
        spec = backbones[name]
        assert spec.kind == expected["kind"], name
        if "hub" in expected:
            assert spec.hub == expected["hub"] and spec.path is None, name
        if "file_name" in expected:
            assert spec.path is not None and spec.path.name == expected["file_name"], name
