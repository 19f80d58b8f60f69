"""Training rows: from a fine-tuning set exported by CapLens or straight from the world generator.

An exported set is a folder with `manifest.json` naming its data file (JSONL, Parquet or
CSV), or a data file itself; image paths in rows are relative to the data file's folder.
The held-out split is made by image, never by caption: no image is on both sides.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

from scoring.csv_safe import read_csv_frame

TABLE_SUFFIXES = (".jsonl", ".parquet", ".csv", ".json")


def _read_table(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path.name}: expected a JSON list of rows")
        return data
    import pandas as pd

    frame = pd.read_parquet(path) if path.suffix == ".parquet" else read_csv_frame(path)
    rows = frame.to_dict(orient="records")
    for row in rows:  # list columns come back as arrays (Parquet) or JSON strings (CSV)
        for key, value in row.items():
            if hasattr(value, "tolist"):
                row[key] = value.tolist()
            elif isinstance(value, str) and value.startswith("[") and value.endswith("]"):
                try:
                    row[key] = json.loads(value)
                except json.JSONDecodeError:
                    pass
    return rows


def _set_file(path: Path) -> tuple[Path, dict | None]:
    """The data file of a set and its manifest (None for a bare data file)."""
    if path.is_dir():
        manifest_path = path / "manifest.json"
        if not manifest_path.is_file():
            raise ValueError(f"{path.name}/ has no manifest.json: pass the set's data file instead")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        data = path / manifest.get("data", "data.jsonl")
        if data.is_dir():
            raise ValueError("sets in the `hf` format are not read by the trainer: export jsonl or parquet")
        return data, manifest
    if path.suffix not in TABLE_SUFFIXES:
        raise ValueError(f"unsupported set file {path.name}: expected {', '.join(TABLE_SUFFIXES)} or a set folder")
    manifest_path = path.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else None
    return path, manifest


PATH_COLUMNS = ("image", "generated_image")  # relative to the data file in a set, absolute once loaded


def rows_fingerprint(rows: list[dict]) -> str:
    """A hash of rows' content in their order, image paths (at any depth: CapLens-R's cross rows
    nest their captions' rows) taken relative to the folder they all share: the same set exported
    again elsewhere (`caplens finetune --collection X --resume` exports it anew) hashes the same,
    a set with other rows or another order does not."""
    def paths(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key in PATH_COLUMNS and isinstance(item, str):
                    yield item
                else:
                    yield from paths(item)
        elif isinstance(value, list):
            for item in value:
                yield from paths(item)

    def relative(value, root: str):
        if isinstance(value, dict):
            return {k: os.path.relpath(v, root) if k in PATH_COLUMNS and isinstance(v, str) else relative(v, root)
                    for k, v in value.items()}
        return [relative(item, root) for item in value] if isinstance(value, list) else value

    folders = [os.path.dirname(path) for path in paths(rows)]
    root = os.path.commonpath(folders) if folders else ""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(relative(row, root) if root else row, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def load_set(path: str | Path) -> tuple[list[dict], str, dict]:
    """Rows (image paths made absolute), the set's hash and its description."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"fine-tuning set not found: {path}")
    data, manifest = _set_file(path)
    rows = _read_table(data)
    base = data.parent.resolve()  # once: resolving every row's path made a 500k-row set load for minutes
    resolved: dict[str, str] = {}
    for key in PATH_COLUMNS:
        for row in rows:
            value = row.get(key)
            if isinstance(value, str):
                if value not in resolved:
                    resolved[value] = os.path.normpath(base / value)
                row[key] = resolved[value]
    digest = hashlib.sha256(data.read_bytes())
    if manifest is not None:
        digest.update(json.dumps(manifest, sort_keys=True).encode())
    about = {"source": str(path), "rows": len(rows), "kind": (manifest or {}).get("kind")}
    return rows, digest.hexdigest(), about


WORLD_SETS_VERSION = 8  # bumped when the world's set writers change, so cached sets are rewritten (2: UMIC's own negatives; 3: long captions as UMIC positives too; 4: UMIC groups name their style and the scene's short caption; 5: PAC-S rows carry the scene's long caption; 6: a rated caption's key numbers it within its language; 7: SPECS rows carry a short caption with a content error; 8: PR-MCS rows carry a caption with a content error)


def world_set(kind: str, spec: dict[str, Any]) -> tuple[list[dict], str, dict]:
    """Rows of world set `kind` ("teacher", "prmcs", "specs", "umic", "pacs" or "ratings") for
    `spec` (`scenes`, `split`, `skip`: scenes of the range passed over first, `size`, `languages`;
    `specs_shuffle`: the share of SPECS negatives token-shuffled, the paper's 0.9 by default;
    `umic_hard_negatives`: a CLIP model reference, e.g. "world:clip", whose image embeddings
    choose UMIC's hard negatives, the captions of the most similar images, as the paper's half of
    "another image's caption"; without it that negative is always a random image's caption),
    written once to a cache folder in the data directory and read back like an exported set."""
    from scoring.registry import data_dir
    from scoring.world.grammar import LANGUAGES
    from scoring.world.sets import split_scenes, write_finetune_sets, write_rated_collection

    spec = {"scenes": 200, "split": "train", "size": 128, "languages": list(LANGUAGES)} | dict(spec)
    skip = int(spec.get("skip", 0))  # in the cache key only when given, so earlier sets stay valid
    rated = kind == "ratings"  # the rated collection and the fine-tuning sets are written separately
    key = hashlib.sha256(json.dumps([spec, rated, WORLD_SETS_VERSION], sort_keys=True).encode()).hexdigest()[:16]
    folder = data_dir() / "cache" / "world-sets" / key
    name = "ratings.jsonl" if rated else f"{kind}.jsonl"
    if not (folder / "DONE").is_file():
        # Written aside and renamed into place: two runs that ask for the same set at once each
        # write their own copy, the first to finish is kept, and neither reads a half-written one.
        partial = folder.with_name(f"{key}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        scenes = split_scenes(spec["split"], int(spec["scenes"]), skip)
        langs = tuple(spec["languages"])
        if rated:
            write_rated_collection(partial, scenes, langs, size=int(spec["size"]), workers=os.cpu_count() or 1)
        else:
            options = {"specs_shuffle": float(spec["specs_shuffle"])} if "specs_shuffle" in spec else {}
            if spec.get("umic_hard_negatives"):
                options["embed_images"] = clip_image_embedder(str(spec["umic_hard_negatives"]))
            write_finetune_sets(partial, scenes, langs, size=int(spec["size"]), **options)
        (partial / "DONE").write_text(json.dumps(spec), encoding="utf-8")
        if folder.is_dir() and not (folder / "DONE").is_file():
            shutil.rmtree(folder)  # left by a writer that stopped before it finished
        try:
            os.rename(partial, folder)
        except OSError:  # another run finished the same set first; the sets are seeded, so equal
            shutil.rmtree(partial)
    rows, digest, about = load_set(folder / name)
    return rows, digest, about | {"world": spec}


def clip_image_embedder(model_ref: str):
    """A function from image files to the L2-normalised image embeddings of the CLIP `model_ref`
    (a folder or PROFILE:BACKBONE), on the CPU: what mines hard negatives among world images.
    The reference is checked here, before a set's images are written, not after."""
    from scoring.training.models import resolve_model

    if resolve_model(model_ref)[1].kind != "clip":
        raise ValueError(f"umic_hard_negatives: {model_ref} is not a CLIP model (its image embeddings choose the negatives)")

    def embed(paths: list[Path]):
        import torch

        from scoring.training.models import load_trainable
        from scoring.training.recipes import clip_image_embeddings

        clip = load_trainable(model_ref, torch.device("cpu"), ("clip",))
        clip.model.eval()
        by_key = clip_image_embeddings(clip, [{"image": str(p)} for p in paths], torch.device("cpu"))
        matrix = torch.stack([by_key[str(p)] for p in paths])
        return torch.nn.functional.normalize(matrix, dim=-1).numpy()
    return embed


def image_key(row: dict) -> str:
    """What makes two rows "the same image" for the split."""
    return str(row.get("image_id") or row["image"])


def split_by_image(rows: list[dict], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """(train, held-out): a seeded share `fraction` of the distinct images, with all their rows,
    goes to the held-out side."""
    keys = sorted({image_key(r) for r in rows})
    if len(keys) < 2:
        raise ValueError(f"a held-out split by image needs at least 2 distinct images; the set has {len(keys)}")
    random.Random(seed).shuffle(keys)
    held = set(keys[: min(len(keys) - 1, max(1, round(fraction * len(keys))))])
    return [r for r in rows if image_key(r) not in held], [r for r in rows if image_key(r) in held]
