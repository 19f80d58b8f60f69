"""`caplens score`: score a candidates JSON against a folder of images (and references)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif")
PROGRESS_MIN_ITEMS = 32  # below this the run is short and a bar is noise


def register(subparsers, parents) -> None:
    """Add `caplens score` to the `caplens` parser."""
    parser = subparsers.add_parser(
        "score",
        parents=parents,
        help="score captions with every metric (CLIPScore / PAC-S JSON formats)",
        description=(
            "Score candidate captions. CANDIDATES_JSON maps image ids to a caption "
            '({"id": "caption"}); REFS_JSON maps them to reference lists ({"id": ["ref", ...]}). '
            "Images are IMAGE_DIR/<id> or IMAGE_DIR/<id>.<ext>. Prints one `NAME: VALUE` line per metric."
        ),
    )
    parser.add_argument("candidates", metavar="CANDIDATES_JSON", type=Path)
    parser.add_argument("image_dir", metavar="IMAGE_DIR", type=Path)
    parser.add_argument("--references", metavar="REFS_JSON", type=Path, help="reference captions per image id")
    parser.add_argument(
        "--metrics", metavar="NAMES",
        help="comma-separated metric names, case-insensitive (default: every metric the inputs allow)",
    )
    parser.add_argument("--profile", metavar="NAME", help="registry profile or .toml path (default: $CAPLENS_PROFILE or hub)")
    parser.add_argument("--lang", metavar="CODE", default="en", help="language of the captions (default: en)")
    parser.add_argument("--out", metavar="PER_ITEM.json", type=Path, help="write per-item scores as JSON")
    parser.add_argument("--device", help="torch device (default: cuda, then mps, then cpu)")
    parser.set_defaults(handler=run_score)


def _read_json(path: Path, what: str):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {what} {path}: not valid JSON ({exc})") from None


def read_candidates(path: Path) -> dict[str, str]:
    data = _read_json(path, "CANDIDATES_JSON")
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f'{path}: expected {{"image_id": "caption", ...}}')
    if not data:
        raise ValueError(f"{path}: no candidates")
    return {str(k): v for k, v in data.items()}


def read_references(path: Path, ids: list[str]) -> dict[str, list[str]]:
    data = _read_json(path, "REFS_JSON")
    if not isinstance(data, dict):
        raise ValueError(f'{path}: expected {{"image_id": ["ref", ...], ...}}')
    refs: dict[str, list[str]] = {}
    for key, value in data.items():
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise ValueError(f"{path}: references of {key!r} must be a list of strings")
        refs[str(key)] = value
    missing = [i for i in ids if i not in refs]
    extra = [k for k in refs if k not in set(ids)]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"no references for {len(missing)} id(s), e.g. {missing[:3]}")
        if extra:
            parts.append(f"{len(extra)} reference id(s) not among the candidates, e.g. {extra[:3]}")
        raise ValueError(f"ids of {path.name} do not match the candidates: " + "; ".join(parts))
    return refs


def find_image(image_dir: Path, image_id: str) -> Path:
    direct = image_dir / image_id
    if direct.is_file():
        return direct
    for ext in IMAGE_EXTENSIONS:
        for candidate in (image_dir / f"{image_id}{ext}", image_dir / f"{image_id}{ext.upper()}"):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(f"no image for id {image_id!r} in {image_dir} (tried {image_id} and {image_id}.jpg/.png/…)")


def run_score(args: argparse.Namespace) -> int:
    from scoring.api import ScoreItem, Scorer

    if not args.image_dir.is_dir():
        raise FileNotFoundError(f"IMAGE_DIR is not a folder: {args.image_dir}")
    candidates = read_candidates(args.candidates)
    ids = list(candidates)
    references = read_references(args.references, ids) if args.references else {}
    items = [
        ScoreItem(
            image=find_image(args.image_dir, image_id), candidate=candidates[image_id],
            references=references.get(image_id, []), lang=args.lang, image_id=image_id,
        )
        for image_id in ids
    ]
    scorer = Scorer(args.profile)
    if args.metrics:
        names = [scorer.canonical_name(n) for n in args.metrics.split(",") if n.strip()]
        if not names:
            raise ValueError("--metrics names no metric")
        needing = [n for n in names if scorer.info(n).needs_references]
        if needing and not references:
            raise ValueError(f"{', '.join(needing)} need references: pass --references REFS_JSON")
    else:
        names = [n for n in scorer.metric_names() if references or not scorer.info(n).needs_references]

    bar = None
    if len(items) >= PROGRESS_MIN_ITEMS:
        from tqdm import tqdm

        bar = tqdm(total=len(names), unit="metric", file=sys.stderr, leave=False)

    def progress(fraction: float, desc: str = "") -> None:
        if bar is not None:
            bar.set_description(desc)
            bar.n = round(fraction * len(names))
            bar.refresh()

    try:
        results = scorer.score(items, names, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    for name, result in results.items():
        if result.unavailable:
            print(f"{name}: unavailable: {result.unavailable}")
        elif result.aggregate is None:
            print(f"{name}: n/a (no item has what it needs)")
        else:
            print(f"{name}: {result.aggregate:.4f}")
    if args.out:
        per_item = {
            image_id: {name: result.values[i] for name, result in results.items()} for i, image_id in enumerate(ids)
        }
        payload = {
            "profile": scorer.profile,
            "metrics": {
                name: {
                    "aggregate": r.aggregate, "unavailable": r.unavailable, "backbone": r.backbone,
                    "truncated": [ids[i] for i, t in enumerate(r.truncated) if t],
                }
                for name, r in results.items()
            },
            "items": per_item,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    return 0
