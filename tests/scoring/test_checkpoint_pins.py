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


# -- offline: the hub is asked once per process, and an unreachable hub means the cache only --

@pytest.fixture
def fresh_probe():
    from scoring.backbones import hub_reachable

    hub_reachable.cache_clear()
    yield hub_reachable
    hub_reachable.cache_clear()


@pytest.fixture
def unreachable(monkeypatch, fresh_probe):
    """No proxy, not marked offline, and every connection refused; counts the attempts."""
    import socket

    import huggingface_hub.constants

    attempts = []

    def refuse(address, timeout=None, *args, **kwargs):
        attempts.append(address)
        raise OSError("network is unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return attempts


def test_the_hub_is_probed_once_and_a_proxy_or_offline_setting_decides_without_a_probe(unreachable, monkeypatch,
                                                                                      fresh_probe):
    import huggingface_hub.constants

    assert fresh_probe() is False and fresh_probe() is False
    assert len(unreachable) == 1 and unreachable[0][0] == "huggingface.co"
    fresh_probe.cache_clear()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert fresh_probe() is True and len(unreachable) == 1  # the proxy decides: not probed
    fresh_probe.cache_clear()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert fresh_probe() is False and len(unreachable) == 1


def _hub_spec(tmp_path, revision: str):
    path = tmp_path / "hub.toml"
    path.write_text(f'''
[backbones.clip]
kind = "clip"
label = "a hub CLIP"
hub = "example/clip"
revision = "{revision}"

[metrics."CLIP-S"]
family = "clip-s"
backbone = "clip"
w = 2.5
''')
    return load_registry(str(path), overrides=[]).backbones["clip"]


def test_an_unreachable_hub_fails_at_once_in_words_without_a_cached_copy(unreachable, tmp_path, monkeypatch):
    import time

    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    started = time.perf_counter()
    with pytest.raises(BackboneUnavailable, match="the hub is not reachable \\(offline\\) and there is no cached copy"):
        fetch(_hub_spec(tmp_path, "a" * 40))
    assert time.perf_counter() - started < 5  # huggingface_hub's retries took about 23 s here


def test_an_unreachable_hub_serves_the_cached_copy(unreachable, tmp_path, monkeypatch):
    import huggingface_hub.constants

    commit = "b" * 40
    snapshot = tmp_path / "cache" / "models--example--clip" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"weights")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    assert fetch(_hub_spec(tmp_path, commit)) == snapshot
