"""Pinned checkpoints: hub backbones follow a commit, and files pinned by SHA-256 in the registry
are verified at load with an error that names the file and both digests (tiny checkpoints)."""
from __future__ import annotations

import hashlib
import re
import shutil

import pytest

from scoring.backbones import BackboneUnavailable, fetch, file_sha256
from scoring.registry import RegistryError, load_registry

COMMIT = re.compile(r"[0-9a-f]{40}")


def _profile(tmp_path, clip_dir, pins: str, extra_backbone: str = "") -> str:
    path = tmp_path / "pinned.toml"
    path.write_text(f'''
[backbones.clip]
kind = "clip"
label = "tiny CLIP, pinned"
path = "{clip_dir}"
{pins}
{extra_backbone}
[metrics."CLIP-S"]
family = "clip-s"
backbone = "clip"
w = 2.5
''')
    return str(path)


def test_every_hub_backbone_of_the_hub_profile_is_pinned_to_a_commit():
    backbones = load_registry("hub", overrides=[]).backbones
    from_hub = [name for name, spec in backbones.items() if spec.hub]
    assert {"clip", "blip-itm", "mclip-text"} <= set(from_hub)
    for name in from_hub:
        assert COMMIT.fullmatch(backbones[name].revision or ""), name
        assert backbones[name].source == f"{backbones[name].hub}@{backbones[name].revision}"


def test_file_sha256_is_the_sha256_of_the_bytes(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"caplens" * 300_000)  # more than one 1 MiB block
    assert file_sha256(path) == hashlib.sha256(b"caplens" * 300_000).hexdigest()


def test_a_pinned_folder_checkpoint_loads_when_its_files_match(tmp_path, tiny_dir):
    clip = tiny_dir / "clip"
    weights, tokenizer = file_sha256(clip / "model.safetensors"), file_sha256(clip / "tokenizer.json")
    profile = _profile(tmp_path, clip, f'sha256 = {{ "model.safetensors" = "{weights.upper()}", '
                                       f'"tokenizer.json" = "{tokenizer}" }}')
    spec = load_registry(profile, overrides=[]).backbones["clip"]
    assert fetch(spec) == clip


def test_a_changed_file_makes_the_backbone_unavailable_naming_both_digests(tmp_path, tiny_dir):
    clip = tmp_path / "clip"
    shutil.copytree(tiny_dir / "clip", clip)
    pinned = file_sha256(clip / "model.safetensors")
    profile = _profile(tmp_path, clip, f'sha256 = {{ "model.safetensors" = "{pinned}" }}')
    spec = load_registry(profile, overrides=[]).backbones["clip"]
    with open(clip / "model.safetensors", "ab") as handle:
        handle.write(b"\0")  # one byte more: another checkpoint under the same path
    changed = file_sha256(clip / "model.safetensors")
    with pytest.raises(BackboneUnavailable) as caught:
        fetch(spec)
    message = str(caught.value)
    assert f"model.safetensors has SHA-256 {changed}, the registry pins {pinned}" in message
    assert "not the pinned checkpoint" in message and str(clip / "model.safetensors") in message


def test_a_pinned_file_the_checkpoint_lacks_is_an_error(tmp_path, tiny_dir):
    profile = _profile(tmp_path, tiny_dir / "clip", f'sha256 = {{ "pytorch_model.bin" = "{"0" * 64}" }}')
    with pytest.raises(BackboneUnavailable, match="pins the SHA-256 of pytorch_model.bin, which the checkpoint does not have"):
        fetch(load_registry(profile, overrides=[]).backbones["clip"])


def test_a_single_file_checkpoint_is_pinned_by_its_own_name(tmp_path, tiny_dir):
    pacs = tiny_dir / "pacs" / "clip_tiny.pth"
    digest = file_sha256(pacs)
    extra = f'''
[backbones.pacs]
kind = "openai-clip"
label = "tiny PAC-S, pinned"
path = "{pacs}"
tokenizer = "@clip"
sha256 = {{ "clip_tiny.pth" = "{digest}" }}
'''
    profile = _profile(tmp_path, tiny_dir / "clip", "", extra)
    assert fetch(load_registry(profile, overrides=[]).backbones["pacs"]) == pacs
    wrong = extra.replace(digest, "f" * 64)
    with pytest.raises(BackboneUnavailable, match=f"clip_tiny.pth has SHA-256 {digest}, the registry pins {'f' * 64}"):
        fetch(load_registry(_profile(tmp_path, tiny_dir / "clip", "", wrong), overrides=[]).backbones["pacs"])


def test_the_scorer_reports_a_mismatch_as_the_metrics_unavailable_reason(tmp_path, tiny_dir):
    from scoring.api import Scorer

    profile = _profile(tmp_path, tiny_dir / "clip", f'sha256 = {{ "model.safetensors" = "{"a" * 64}" }}')
    reason = Scorer(profile, device="cpu").unavailable_reason("CLIP-S")
    assert reason.startswith(f"checkpoint {tiny_dir / 'clip'}: model.safetensors has SHA-256 ")


@pytest.mark.parametrize("pins, error", [
    ('sha256 = "abc"', "sha256 must be a table of file name = 64-hex-digit SHA-256"),
    ('sha256 = { "model.safetensors" = "xyz" }', "sha256 must be a table"),
    ('sha256 = {}', "sha256 must be a table"),
])
def test_malformed_pins_are_registry_errors(tmp_path, tiny_dir, pins, error):
    with pytest.raises(RegistryError, match=error):
        load_registry(_profile(tmp_path, tiny_dir / "clip", pins), overrides=[])


def test_hash_pins_on_a_moving_hub_revision_are_refused(tmp_path):
    path = tmp_path / "hubpins.toml"
    path.write_text(f'''
[backbones.clip]
kind = "clip"
hub = "openai/clip-vit-base-patch32"
revision = "main"
sha256 = {{ "model.safetensors" = "{"0" * 64}" }}

[metrics."CLIP-S"]
family = "clip-s"
backbone = "clip"
''')
    with pytest.raises(RegistryError, match="revision 'main', which can move: pin `revision` to a 40-hex-digit commit"):
        load_registry(str(path), overrides=[])
