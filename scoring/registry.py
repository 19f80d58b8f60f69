"""Metric registry kept as data: one TOML file per profile, with overrides.

A profile (``scoring/registry/<profile>.toml``) names backbones (where a checkpoint comes
from and what format it is in) and metrics (which backbone, weight w, prompt prefix, token
limit).  The schema is documented in docs/scoring.md.  Everything here is plain data; loading
models happens in :mod:`scoring.backbones`.

Override order (later wins): the profile file, the user registry
(``$CAPLENS_DATA_DIR/registry.toml`` when present; trained runs are registered there by
:mod:`scoring.user_registry`), the config file ``$CAPLENS_REGISTRY_CONFIG``, then environment variables
``CAPLENS_REGISTRY_<ENTRY>_<FIELD>`` (entry = metric or backbone name, upper-cased, every
non-alphanumeric character turned into ``_``; metrics are matched before backbones).
"""
from __future__ import annotations

import copy
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoring.paths import data_dir

# Fields of a metric row (and of a CapLens-R head's caplens_r.json) that name backbones read
# beside `backbone`: user_registry registers them with a run, fingerprint keys scores by them.
COMPANION_FIELDS = ("text_backbone", "vision_backbone", "cross_backbone")

REGISTRY_DIR = Path(__file__).resolve().parent / "registry"
BACKBONE_KINDS = ("clip", "openai-clip", "longclip", "st-text", "blip-itm", "caplens-r")
PRECISIONS = ("fp32", "bf16", "fp16")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
METRIC_FAMILIES = (
    "clip-s", "refclip-s", "mcs", "specs", "itm", "bleu", "meteor", "rouge-l", "cider", "spice", "caplens-r",
)
# Which paper's checkpoint a row of a family follows (keys its description and citation), so
# that behaviour never depends on a metric's display name. The first variant is the default.
METRIC_VARIANTS = {
    "clip-s": ("clip", "pacs"), "refclip-s": ("clip", "pacs"), "mcs": ("mcs", "pr-mcs"), "itm": ("umic-c", "umic"),
    "caplens-r": ("frozen", "cross"),
}
# Fields holding local paths: resolved relative to the TOML file that set them.
PATH_FIELDS = ("path", "tokenizer", "head_file")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class RegistryError(ValueError):
    """A profile file or override is malformed (unknown profile, bad field, bad type)."""


@dataclass(frozen=True)
class BackboneSpec:
    """Where one backbone's checkpoint comes from and what format it is in."""

    name: str
    kind: str
    label: str
    hub: str | None = None  # hub repository id (fetched with huggingface_hub)
    revision: str | None = None
    file: str | None = None  # for single-file kinds fetched from the hub
    path: Path | None = None  # local checkpoint (folder or file), wins over hub
    tokenizer: str | Path | None = None  # tokenizer/image processor source for state-dict kinds
    max_tokens: int | None = None  # text token limit; default from the model config
    precision: str | None = None  # fp32 | bf16 | fp16 on CUDA; default: measured per kind
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """Human-readable origin, used in reasons and cache fingerprints."""
        if self.path is not None:
            return str(self.path)
        if self.hub:
            where = f"{self.hub}@{self.revision or 'main'}"
            return f"{where}/{self.file}" if self.file else where
        return "<no source>"


@dataclass(frozen=True)
class MetricSpec:
    """One metric row: its family (the formula) and its parameters."""

    name: str
    family: str
    backbone: str | None = None  # text (or only) backbone
    vision_backbone: str | None = None  # MCS: image tower from another backbone
    w: float = 1.0
    prefix: str = ""
    max_tokens: int | None = None
    n: int | None = None  # BLEU order
    variant: str = ""  # one of METRIC_VARIANTS[family]; "" for families with one variant
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Registry:
    """A resolved profile: ordered metrics and the backbones they use."""

    profile: str
    source: Path
    metrics: dict[str, MetricSpec]
    backbones: dict[str, BackboneSpec]
    description: str = ""


# Other names users know a metric by: the COCO toolkit's CIDEr is CIDEr-D, as the docs call it.
METRIC_ALIASES = {"cider-d": "cider"}


def canonical_metric_name(registry: Registry, name: str) -> str:
    """Registry spelling of ``name`` (case-insensitive, or an alias of METRIC_ALIASES); LookupError if unknown."""
    spelled = {known.lower(): known for known in registry.metrics}
    wanted = name.strip().lower()
    found = spelled.get(wanted) or spelled.get(METRIC_ALIASES.get(wanted, ""))  # a registry name wins over an alias
    if found:
        return found
    raise LookupError(
        f"unknown metric {name!r} in profile {registry.profile!r}; "
        f"known: {', '.join(registry.metrics)}"
    )


def available_profiles() -> list[str]:
    return sorted(p.stem for p in REGISTRY_DIR.glob("*.toml"))


def default_profile() -> str:
    return os.environ.get("CAPLENS_PROFILE") or "hub"


def tiny_dir() -> Path:
    """Where the tiny test checkpoints live (``$CAPLENS_TINY_DIR``, else under the data dir)."""
    explicit = os.environ.get("CAPLENS_TINY_DIR")
    return Path(explicit).expanduser() if explicit else data_dir() / "tiny-checkpoints"


def bench_dir() -> Path:
    """Where the hub-sized random bench checkpoints live (``$CAPLENS_BENCH_DIR``, else under
    the data dir)."""
    explicit = os.environ.get("CAPLENS_BENCH_DIR")
    return Path(explicit).expanduser() if explicit else data_dir() / "bench-checkpoints"


# Variables that always have a value, even when unset in the environment.
BUILTIN_VARIABLES = {"CAPLENS_DATA_DIR": data_dir, "CAPLENS_TINY_DIR": tiny_dir, "CAPLENS_BENCH_DIR": bench_dir}


def expand_vars(text: str) -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}``; see BUILTIN_VARIABLES for defaults.

    An unset variable without a default is an error, so a typo cannot silently turn into a
    path that happens not to exist.
    """

    def replace(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name)
        if value:
            return value
        if name in BUILTIN_VARIABLES:
            return str(BUILTIN_VARIABLES[name]())
        if default is not None:
            return default
        raise RegistryError(f"environment variable {name} is not set (used as ${{{name}}})")

    return _VAR.sub(replace, text)


def _resolve_path(value: str, base: Path) -> Path:
    expanded = Path(expand_vars(value)).expanduser()
    return expanded if expanded.is_absolute() else (base / expanded).resolve()


def _profile_file(profile: str | os.PathLike) -> Path:
    candidate = Path(profile)
    if candidate.suffix == ".toml":
        if not candidate.is_file():
            raise RegistryError(f"registry file not found: {candidate}")
        return candidate.resolve()
    path = REGISTRY_DIR / f"{profile}.toml"
    if not path.is_file():
        raise RegistryError(
            f"unknown profile {str(profile)!r}; known: {', '.join(available_profiles())}"
        )
    return path


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: invalid TOML: {exc}") from exc


def _absolutise(table: dict[str, Any], base: Path) -> dict[str, Any]:
    """Resolve local-path fields of every entry against ``base`` (the TOML's folder)."""
    out = copy.deepcopy(table)
    for entry in out.values():
        if not isinstance(entry, dict):
            continue
        for key in PATH_FIELDS:
            value = entry.get(key)
            if isinstance(value, str) and not _is_not_a_path(key, value):
                entry[key] = str(_resolve_path(value, base))
    return out


def _is_not_a_path(key: str, value: str) -> bool:
    """`tokenizer` may name another backbone ("@clip") or a hub id ("hub:<repo>")."""
    return key == "tokenizer" and value.startswith(("@", "hub:"))


def _merge(base: dict[str, Any], update: dict[str, Any]) -> None:
    for section in ("backbones", "metrics"):
        for name, fields in (update.get(section) or {}).items():
            base.setdefault(section, {}).setdefault(name, {}).update(fields)


def _env_key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _coerce(value: str, current: Any) -> Any:
    """An environment string typed like the value it replaces."""
    if isinstance(current, bool):
        return value.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(current, int):
        return int(value)
    if isinstance(current, float):
        return float(value)
    return value


_NUMERIC_FIELDS = {"w": float, "max_tokens": int, "n": int}


def _apply_env_overrides(data: dict[str, Any]) -> None:
    prefix = "CAPLENS_REGISTRY_"
    sections = [("metrics", n) for n in data.get("metrics", {})] + [
        ("backbones", n) for n in data.get("backbones", {})
    ]
    # Longest entry keys first so "REFCLIP_S" is not mistaken for "REF" + field.
    sections.sort(key=lambda item: -len(_env_key(item[1])))
    for variable, value in os.environ.items():
        if not variable.startswith(prefix) or variable == "CAPLENS_REGISTRY_CONFIG":
            continue
        rest = variable[len(prefix):]
        for section, name in sections:
            key = _env_key(name) + "_"
            if rest.startswith(key) and len(rest) > len(key):
                field_name = rest[len(key):].lower()
                entry = data[section][name]
                if field_name in PATH_FIELDS and not _is_not_a_path(field_name, value):
                    entry[field_name] = str(_resolve_path(value, Path.cwd()))
                elif field_name in _NUMERIC_FIELDS:
                    entry[field_name] = _NUMERIC_FIELDS[field_name](value)
                else:
                    entry[field_name] = _coerce(value, entry.get(field_name, ""))
                break


def override_files() -> list[Path]:
    """The override files in the order they apply: the user registry, then the config file."""
    files = []
    user = data_dir() / "registry.toml"
    if user.is_file():
        files.append(user.resolve())
    explicit = os.environ.get("CAPLENS_REGISTRY_CONFIG")
    if explicit:
        path = Path(expand_vars(explicit)).expanduser()
        if not path.is_file():
            raise RegistryError(f"CAPLENS_REGISTRY_CONFIG points at a missing file: {path}")
        if path.resolve() not in files:
            files.append(path.resolve())
    return files


def overrides_stamp() -> tuple:
    """Changes whenever an override file is added, removed or rewritten (Scorer refresh)."""
    stamp = []
    for path in override_files():
        status = path.stat()
        stamp.append((str(path), status.st_mtime_ns, status.st_size))
    return tuple(stamp)


def load_registry(profile: str | os.PathLike | None = None, *, overrides: list[Path] | None = None) -> Registry:
    """Read a profile (name or path to a TOML file) and apply every override
    (``overrides``: these files instead of :func:`override_files`)."""
    profile = profile or default_profile()
    path = _profile_file(profile)
    raw = _read_toml(path)
    data: dict[str, Any] = {
        "backbones": _absolutise(raw.get("backbones", {}), path.parent),
        "metrics": copy.deepcopy(raw.get("metrics", {})),
    }
    for config in override_files() if overrides is None else overrides:
        override = _read_toml(config)
        _merge(data, {
            "backbones": _absolutise(override.get("backbones", {}), config.parent),
            "metrics": override.get("metrics", {}),
        })
        per_profile = (override.get("profiles") or {}).get(path.stem) or {}
        _merge(data, {
            "backbones": _absolutise(per_profile.get("backbones", {}), config.parent),
            "metrics": per_profile.get("metrics", {}),
        })
    _apply_env_overrides(data)
    backbones = {name: _backbone_spec(name, fields, path) for name, fields in data["backbones"].items()}
    metrics = {name: _metric_spec(name, fields, backbones, path) for name, fields in data["metrics"].items()}
    info = raw.get("profile", {})
    return Registry(
        profile=info.get("name", path.stem),
        source=path,
        metrics=metrics,
        backbones=backbones,
        description=info.get("description", ""),
    )


def _backbone_spec(name: str, fields: dict[str, Any], origin: Path) -> BackboneSpec:
    fields = dict(fields)
    kind = fields.pop("kind", None)
    if kind not in BACKBONE_KINDS:
        raise RegistryError(f"{origin}: backbone {name!r} has kind {kind!r}; expected one of {BACKBONE_KINDS}")
    path = fields.pop("path", None)
    tokenizer = fields.pop("tokenizer", None)
    if isinstance(tokenizer, str) and tokenizer.startswith("hub:"):
        tokenizer = tokenizer[len("hub:"):]
    elif isinstance(tokenizer, str) and not tokenizer.startswith("@"):
        tokenizer = Path(tokenizer)
    spec = BackboneSpec(
        name=name,
        kind=kind,
        label=fields.pop("label", name),
        hub=fields.pop("hub", None),
        revision=fields.pop("revision", None),
        file=fields.pop("file", None),
        path=Path(path) if path else None,
        tokenizer=tokenizer,
        max_tokens=fields.pop("max_tokens", None),
        precision=fields.pop("precision", None),
        extra=fields,
    )
    if spec.precision not in (None, *PRECISIONS):
        raise RegistryError(f"{origin}: backbone {name!r} has precision {spec.precision!r}; expected one of {PRECISIONS}")
    if spec.path is None and spec.hub is None:
        raise RegistryError(f"{origin}: backbone {name!r} needs `path` or `hub`")
    pins = spec.extra.get("sha256")
    if pins is not None:
        if not isinstance(pins, dict) or not pins or not all(
                isinstance(k, str) and isinstance(v, str) and _SHA256.fullmatch(v) for k, v in pins.items()):
            raise RegistryError(f"{origin}: backbone {name!r}: sha256 must be a table of file name = "
                                "64-hex-digit SHA-256")
        if spec.path is None and not _COMMIT.fullmatch(spec.revision or ""):
            raise RegistryError(f"{origin}: backbone {name!r} pins file hashes of {spec.hub} at revision "
                                f"{spec.revision or 'main'!r}, which can move: pin `revision` to a 40-hex-digit commit")
    return spec


def _metric_spec(name: str, fields: dict[str, Any], backbones: dict[str, BackboneSpec], origin: Path) -> MetricSpec:
    fields = dict(fields)
    family = fields.pop("family", None)
    if family not in METRIC_FAMILIES:
        raise RegistryError(f"{origin}: metric {name!r} has family {family!r}; expected one of {METRIC_FAMILIES}")
    for key in ("backbone", "vision_backbone"):
        ref = fields.get(key)
        if ref is not None and ref not in backbones:
            raise RegistryError(f"{origin}: metric {name!r} uses unknown {key} {ref!r}")
    variants = METRIC_VARIANTS.get(family, ("",))
    variant = fields.pop("variant", variants[0])
    if variant not in variants:
        raise RegistryError(f"{origin}: metric {name!r} has variant {variant!r}; {family} has {variants}")
    return MetricSpec(
        name=name,
        family=family,
        variant=variant,
        backbone=fields.pop("backbone", None),
        vision_backbone=fields.pop("vision_backbone", None),
        w=float(fields.pop("w", 1.0)),
        prefix=fields.pop("prefix", ""),
        max_tokens=fields.pop("max_tokens", None),
        n=fields.pop("n", None),
        extra=fields,
    )
