"""The user registry: trained runs become new versions of their metric.

A finished training run (``scoring.training.train``) is registered as ``<METRIC>@<version>``,
e.g. ``PR-MCS@world-2026-11-23``, in ``$CAPLENS_DATA_DIR/registry.toml``, the override file
every profile reads (see :mod:`scoring.registry`).  The entry copies the formula of the
metric it versions (family, w, prefix, image tower) from the profile the run was trained for,
points a new backbone at the run's checkpoint folder, and keeps what the run was trained on
and its held-out numbers before and after, which the metric card shows.  So the Scorer, the
CLI's ``--metrics`` and the app's /score see the new version like any other metric.

New entries are appended as text (the user's own comments and overrides stay as they are),
the result is parsed before it replaces the file, and writers are serialised by a lock file.
Before it is written, the new version scores its run's held-out captions: a version that is
unavailable there, or gives every caption the same score, is refused with the reason.
:func:`unregister` takes a version out of the metric lists again.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import re
import tempfile
import tomllib
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from scoring.paths import data_dir
from scoring.registry import (
    COMPANION_FIELDS, METRIC_FAMILIES, MetricSpec, RegistryError, available_profiles, default_profile, load_registry, override_files,
)

if TYPE_CHECKING:  # pragma: no cover
    from scoring.training import TrainResult

TRAINING_FILE = "training.json"
# A registry reference in a training config: PROFILE:BACKBONE (world:clip).
_REF = re.compile(r"[A-Za-z0-9_-]{2,}:[^/\\].*")
# Backbones a metric family reads besides the trained one: metric field -> training config key.
# A dotted key reads a nested table (architecture.cross: the cross-encoder a CapLens-R head reads).
COMPANIONS = {"mcs": {"vision_backbone": "teacher"},
              "caplens-r": {"text_backbone": "base", "vision_backbone": "teacher", "cross_backbone": "architecture.cross"}}
# Metric-spec fields a registered version carries for its card (not formula parameters).
CARD_FIELDS = ("recipe", "trained_on", "trained_at", "run", "device", "before", "after", "registered_by")
# Held-out rows a new version scores before it is written (the registration check).
HELDOUT_CHECK_ROWS = 64
# The caption a held-out row of each set kind scores: the first of these it has.
CAPTION_KEYS = ("caption", "candidate", "original", "positive", "base")
MARKER = "# Registered by CapLens: "


def user_registry_path() -> Path:
    return data_dir() / "registry.toml"


def register_run(result: "TrainResult | str | os.PathLike", *, version: str | None = None,
                 profile: str | None = None, fallback_profile: str | None = None, owner: str | None = None,
                 check: bool = True) -> str:
    """Register a finished run as a new version of its metric; returns the new metric name.

    ``result`` is a TrainResult or a run folder holding ``training.json``.  ``version``
    defaults to ``<data>-<date>`` (``world-2026-11-23``), made unique with ``-2``, ``-3``…;
    an explicit version that is taken is an error.  The entry goes to ``profile``, else the
    profile of the run's registry references (``world:clip``), else ``fallback_profile``
    (the app's); with none of them it is registered for every profile, which is refused when
    the version borrows a profile's backbone (an MCS image tower its run did not name).
    Backbones the run named by folder come along as entries of their own (see _companions).
    ``owner`` (the account registering it) goes on the card. With ``check``, the version first
    scores up to HELDOUT_CHECK_ROWS of the run's held-out rows and is refused (ValueError,
    nothing written) when it cannot score them or gives them all the same score.
    """
    run = _run_record(result)
    profile = profile or _profile_of(run["config"]) or fallback_profile
    base_registry = load_registry(profile or default_profile())
    base = _base_metric(base_registry.metrics, run["metric"])
    path = user_registry_path()
    with _locked(path):
        existing = _read(path)
        taken = {name.lower() for name in _registered_names(existing)} | {n.lower() for n in base_registry.metrics}
        name = _version_name(run, version, taken)
        backbone = _backbone_name(name)
        backbones = {backbone: {"kind": run["backbone_kind"], "path": str(run["out_dir"]),
                                "label": f"{name}: {run['recipe']} run {run['out_dir'].name} (CapLens-trained)"}}
        metric = _metric_fields(base, backbone, run)
        if owner:
            metric["registered_by"] = owner
        for field_name, (companion, companion_fields) in _companions(base, backbone, run["config"]).items():
            metric[field_name] = companion
            if companion_fields:
                backbones[companion] = companion_fields
        borrowed = [metric[f] for f in COMPANION_FIELDS if metric.get(f) and metric[f] not in backbones]
        if borrowed and profile is None:
            raise ValueError(f"{run['metric']} uses backbone(s) {', '.join(borrowed)} of a profile: "
                             "name the profile to register for")
        _write_checked(path, _entry_text(profile, backbones, name, metric), profile,
                       check=(lambda registry: check_heldout(registry, name, run)) if check else None)
    return name


def unregister(name: str) -> None:
    """Take a registered version (and the backbones registered with it) out of the user
    registry; its run folder stays. LookupError when CapLens registered no such version."""
    path = user_registry_path()
    with _locked(path):
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        lines = text.splitlines(keepends=True)
        start = next((i for i, line in enumerate(lines) if line.rstrip("\n") == MARKER + name), None)
        if start is None:
            raise LookupError(f"{name} is not a version registered by CapLens")
        end = start + 1
        while end < len(lines) and not lines[end].startswith(MARKER):
            end += 1
        # The entry ends at its metric table's last field; anything the user wrote after it stays.
        header = next(i for i in range(start, end) if lines[i].rstrip().endswith(f"metrics.{_key(name)}]"))
        stop = header + 1
        while stop < end and lines[stop].strip() and not lines[stop].lstrip().startswith(("[", "#")):
            stop += 1
        if start > 0 and not lines[start - 1].strip():
            start -= 1  # the blank line written before the marker
        _replace_checked(path, "".join(lines[:start] + lines[stop:]), None)


def registered_versions() -> list[dict[str, Any]]:
    """Versions CapLens registered, oldest first: name, profile (None: every profile), recipe,
    trained_at and registered_by (None when not recorded)."""
    data = _read(user_registry_path())
    sections = [(None, data.get("metrics", {}))]
    sections += [(profile, section.get("metrics", {})) for profile, section in data.get("profiles", {}).items()]
    found = []
    for profile, metrics in sections:
        for name, fields in metrics.items():
            if isinstance(fields, dict) and "run" in fields and "recipe" in fields:
                found.append({"name": name, "profile": profile, "recipe": fields.get("recipe"),
                              "trained_at": fields.get("trained_at"), "registered_by": fields.get("registered_by")})
    return sorted(found, key=lambda v: str(v["trained_at"]))


def heldout_items(run: dict[str, Any], limit: int = HELDOUT_CHECK_ROWS) -> list:
    """Up to ``limit`` ScoreItems from the held-out rows of a run record (its saved config,
    split as the trainer split it), one caption per row."""
    from scoring.api import ScoreItem
    from scoring.training.config import config_from_dict
    from scoring.training.trainer import split_rows

    values = {"recipe": run["recipe"], "out": str(run["out_dir"]), **run["config"]}
    try:
        _, held, _, _ = split_rows(config_from_dict(values, run["out_dir"]))
    except (ValueError, OSError, KeyError) as exc:
        raise ValueError(f"its held-out set cannot be rebuilt ({exc})") from None
    items = []
    for row in (caption for group in held for caption in group.get("captions", [group])):  # per-image groups too
        caption = next((row[k] for k in CAPTION_KEYS if isinstance(row.get(k), str) and row[k].strip()), None)
        if caption is None:
            continue
        references = row.get("references")
        items.append(ScoreItem(row.get("image"), caption,
                               list(references) if isinstance(references, (list, tuple)) else [],
                               row.get("language") or row.get("lang") or "en"))
        if len(items) >= limit:
            break
    return items


def check_heldout(registry, name: str, run: dict[str, Any]) -> None:
    """Refuse (ValueError) a version that cannot score its run's held-out captions or gives
    them all the same score: such a metric ranks nothing."""
    from scoring.api import Scorer

    try:
        items = heldout_items(run)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if len(items) < 2:
        raise ValueError(f"{name}: its held-out set has {len(items)} caption(s) to score, "
                         "too few to tell whether it separates captions")
    result = Scorer(registry=registry).score(items, [name])[name]
    if result.unavailable:
        raise ValueError(f"{name} cannot score its held-out set ({result.unavailable})")
    values = [v for v in result.values if v is not None and math.isfinite(v)]
    if len(values) < 2:
        raise ValueError(f"{name} gave {len(values)} of {len(items)} held-out captions a score")
    if max(values) - min(values) < 1e-6:
        raise ValueError(f"{name} gives all {len(values)} held-out captions the same score "
                         f"({values[0]:.4g}), so it cannot tell a better caption from a worse one")


def training_note(spec: MetricSpec) -> str:
    """The card's sentence on a registered version: what it was trained on, before → after."""
    extra = spec.extra
    if "run" not in extra:
        return ""
    before, after = extra.get("before") or {}, extra.get("after") or {}
    changes = [f"{key} {_number(before.get(key))} → {_number(after.get(key))}" for key in sorted(set(before) | set(after))]
    return (
        f"Trained by CapLens ({extra.get('recipe', '?')} recipe) on {extra.get('trained_on', '?')}, "
        f"{extra.get('trained_at', '?')}, on {extra.get('device', '?')}. "
        + (f"Held-out before → after: {'; '.join(changes)}." if changes else "No held-out numbers recorded.")
    )


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "–"


# -- the run -----------------------------------------------------------------------------

def _run_record(result) -> dict[str, Any]:
    """The fields registration needs, from a TrainResult or a run folder's training.json."""
    if isinstance(result, (str, os.PathLike)):
        folder = Path(result)
        record_file = folder / TRAINING_FILE
        if not record_file.is_file():
            raise ValueError(f"{folder.name}: not a finished run (no {TRAINING_FILE})")
        record = json.loads(record_file.read_text(encoding="utf-8"))
        record["out_dir"] = folder
    else:
        record = {key: getattr(result, key) for key in
                  ("out_dir", "recipe", "metric", "backbone_kind", "before", "after", "device")}
        saved = Path(result.out_dir) / TRAINING_FILE
        written = json.loads(saved.read_text(encoding="utf-8")) if saved.is_file() else {}
        record["config"], record["finished_at"] = written.get("config", {}), written.get("finished_at")
    missing = [key for key in ("recipe", "metric", "backbone_kind") if not record.get(key)]
    if missing:
        raise ValueError(f"run record lacks {', '.join(missing)}")
    record["out_dir"] = Path(record["out_dir"]).resolve()
    record.setdefault("config", {})
    return record


def _profile_of(config: dict[str, Any]) -> str | None:
    """The profile named by the run's registry references (``world:clip``), teacher first."""
    for key in ("teacher", "base"):
        ref = config.get(key)
        if isinstance(ref, str) and _REF.fullmatch(ref):
            return ref.split(":", 1)[0]
    return None


def describe_data(data: Any) -> str:
    """A short phrase for the card: the world generator or the exported set a run used."""
    if isinstance(data, dict) and "world" in data:
        world = data["world"] if isinstance(data["world"], dict) else {}
        detail = ", ".join(f"{key} {'/'.join(map(str, value)) if isinstance(value, list) else value}"
                           for key, value in world.items())
        return "the synthetic world" + (f" ({detail})" if detail else "")
    if isinstance(data, str) and data:
        path = Path(data)
        folder = path if path.is_dir() else path.parent
        manifest_file = folder / "manifest.json"
        if manifest_file.is_file():
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
            what = [f"{manifest['kind']} set" if manifest.get("kind") else "set"]
            if _collection(manifest):
                what.append(f"of collection {_collection(manifest)!r}")
            if manifest.get("rows") is not None:
                what.append(f"({manifest['rows']} rows)")
            return " ".join(what) + f" {folder.name}"
        return f"the set {path.name}"
    return "unknown data"


def _data_label(data: Any) -> str:
    if isinstance(data, dict) and "world" in data:
        return "world"
    if isinstance(data, str) and data:
        path = Path(data)
        manifest_file = (path if path.is_dir() else path.parent) / "manifest.json"
        if manifest_file.is_file():
            collection = _collection(json.loads(manifest_file.read_text(encoding="utf-8")))
            if collection:
                return _slug(str(collection))
        return _slug(path.stem if path.is_file() else path.name)
    return "run"


def _collection(manifest: dict) -> str | None:
    """The collection an exported set came from (``provenance.collection`` in its manifest)."""
    return manifest.get("collection") or (manifest.get("provenance") or {}).get("collection")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "run"


# -- the entry ---------------------------------------------------------------------------

def _base_metric(metrics: dict[str, MetricSpec], metric: str) -> MetricSpec:
    """The metric being versioned; a metric no profile has needs its own family (CapLens-R)."""
    for name, spec in metrics.items():
        if name.lower() == metric.lower():
            return spec
    family = metric.lower()
    if family not in METRIC_FAMILIES:
        raise RegistryError(f"metric {metric!r} is in no profile and is no metric family; cannot register it")
    return MetricSpec(name=metric, family=family)


def _version_name(run: dict[str, Any], version: str | None, taken: set[str]) -> str:
    if version is not None:
        name = f"{run['metric']}@{_slug(version)}"
        if name.lower() in taken:
            raise ValueError(f"metric {name} is already registered; choose another version")
        return name
    stem = f"{run['metric']}@{_data_label(run['config'].get('data'))}-{_finished_at(run):%Y-%m-%d}"
    name, counter = stem, 1
    while name.lower() in taken:
        counter += 1
        name = f"{stem}-{counter}"
    return name


def _finished_at(run: dict[str, Any]) -> datetime:
    """When the run finished (its record's `finished_at`), which its card and default version
    name give, not when it was registered (a day later, by `caplens finetune register`); now for
    a record written before runs kept it."""
    stamp = run.get("finished_at")
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) if stamp \
        else datetime.now(timezone.utc)


def _backbone_name(metric_name: str) -> str:
    return "run-" + _slug(metric_name.replace("@", "-"))


def _companions(base: MetricSpec, backbone: str, config: dict[str, Any]) -> dict[str, tuple[str, dict | None]]:
    """The frozen backbones the run scored with besides its own checkpoint, from its config:
    field -> (backbone name, fields of a new entry, or None for a profile's backbone)."""
    from scoring.training.models import detect_kind

    found = {}
    if base.family == "caplens-r" and not config.get("teacher"):
        return found  # a cross-mode CapLens-R reads no other backbone
    for field_name, config_key in COMPANIONS.get(base.family, {}).items():
        ref = config
        for part in config_key.split("."):
            ref = ref.get(part) if isinstance(ref, dict) else None
        if not isinstance(ref, str) or not ref:
            continue
        if _REF.fullmatch(ref):
            found[field_name] = (ref.split(":", 1)[1], None)
        else:
            name = f"{backbone}-{field_name.removesuffix('_backbone')}"
            found[field_name] = (name, {"kind": detect_kind(Path(ref)), "path": str(Path(ref).resolve()),
                                        "label": f"{Path(ref).name} (frozen {config_key} of {backbone})"})
    return found


def _metric_fields(base: MetricSpec, backbone: str, run: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {"family": base.family, "backbone": backbone}
    if base.family == "caplens-r":  # the run decides: a cross-encoder folder, or a frozen-feature head
        fields["variant"] = "cross" if run["backbone_kind"] == "blip-itm" else "frozen"
    elif base.variant:
        fields["variant"] = base.variant
    if base.vision_backbone:
        fields["vision_backbone"] = base.vision_backbone
    fields.update({"w": base.w, "prefix": base.prefix})
    for key in ("max_tokens", "n"):
        if getattr(base, key) is not None:
            fields[key] = getattr(base, key)
    fields.update({k: v for k, v in base.extra.items() if k not in CARD_FIELDS})
    fields.update({
        "recipe": run["recipe"],
        "trained_on": describe_data(run["config"].get("data")),
        "trained_at": _finished_at(run).strftime("%Y-%m-%d %H:%M UTC"),
        "run": str(run["out_dir"]),
        "device": str(run.get("device") or "?"),
        "before": {k: float(v) for k, v in (run.get("before") or {}).items() if _finite(v)},
        "after": {k: float(v) for k, v in (run.get("after") or {}).items() if _finite(v)},
    })
    return fields


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _entry_text(profile: str | None, backbones: dict[str, dict], metric: str, metric_fields: dict) -> str:
    where = f"profiles.{_key(profile)}." if profile else ""
    lines = [f"\n{MARKER}{metric}"]
    for backbone, fields in backbones.items():
        lines += [f"[{where}backbones.{_key(backbone)}]", *(f"{_key(k)} = {_value(v)}" for k, v in fields.items()), ""]
    lines += [f"[{where}metrics.{_key(metric)}]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in metric_fields.items()]
    return "\n".join(lines) + "\n"


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


# -- the file ----------------------------------------------------------------------------

def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path.name}: invalid TOML: {exc}") from None


def _registered_names(data: dict[str, Any]) -> list[str]:
    names = list(data.get("metrics", {}))
    for section in data.get("profiles", {}).values():
        names += list(section.get("metrics", {}))
    return names


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_checked(path: Path, addition: str, profile: str | None, check=None) -> None:
    """Append ``addition`` (see _replace_checked)."""
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    updated = current + ("" if not current or current.endswith("\n") else "\n") + addition
    _replace_checked(path, updated, profile, check)


def _replace_checked(path: Path, updated: str, profile: str | None, check=None) -> None:
    """Replace the file's text with ``updated``; it must still load for every profile it touches
    (all with ``profile`` None) before it replaces the old one, so a bad edit can never break
    the registry. ``check(registry)`` then sees the new registry of ``profile`` (else the default
    one) and may refuse the edit by raising ValueError."""
    handle, temporary = tempfile.mkstemp(prefix=".registry-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(updated)
        others = [f for f in override_files() if f != path.resolve()]
        loaded = {name: load_registry(name, overrides=[Path(temporary), *others])
                  for name in ([profile] if profile else available_profiles())}
    except (RegistryError, OSError) as exc:
        Path(temporary).unlink(missing_ok=True)
        raise RegistryError(f"the new entry would break the registry ({exc}); nothing written") from None
    if check is not None:
        try:
            check(loaded.get(profile or default_profile()) or load_registry(
                default_profile(), overrides=[Path(temporary), *others]))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    os.replace(temporary, path)
