"""`caplens score`: score rows (CLIPScore JSON, COCO, CSV or JSONL) against a folder of images."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif")
DEFAULT_BATCH_ROWS = 256


def register(subparsers, parents) -> None:
    """Add `caplens score` to the `caplens` parser."""
    parser = subparsers.add_parser(
        "score",
        parents=parents,
        help="score captions with every metric (CLIPScore / PAC-S JSON, COCO, CSV or JSONL rows)",
        description=(
            "Score candidate captions. ROWS is a CSV, JSONL or Parquet file of rows (image, candidate, "
            "references: a JSON list), a COCO results list (with --references: its COCO captions file), or "
            'a CLIPScore-style JSON mapping image ids to a caption ({"id": "caption"}; --references: '
            '{"id": ["ref", ...]}). Images are IMAGE_DIR/<image> or IMAGE_DIR/<id>.<ext>. '
            "Prints one `NAME: VALUE` line per metric; progress goes to stderr."
        ),
    )
    parser.add_argument("candidates", metavar="ROWS", type=Path)
    parser.add_argument("image_dir", metavar="IMAGE_DIR", type=Path)
    parser.add_argument("--references", metavar="REFS_JSON", type=Path,
                        help="reference captions per image id (a COCO captions file for COCO results)")
    parser.add_argument(
        "--metrics", metavar="NAMES",
        help="comma-separated metric names, case-insensitive (default: every metric the inputs allow)",
    )
    parser.add_argument("--profile", metavar="NAME",
                        help="registry profile or .toml path (default: $CAPLENS_PROFILE, else hub when its checkpoints "
                             "load, else world, as `caplens serve` chooses)")
    parser.add_argument("--lang", metavar="CODE", default="auto",
                        help="language of the captions without a lang column: an ISO 639-1 code, or auto to "
                             "detect each caption's, as the app does (default: auto)")
    parser.add_argument("--out", metavar="PER_ITEM.json", type=Path, help="write per-item scores as JSON")
    parser.add_argument("--device", help="torch device: cpu, cuda, cuda:1, mps (default: cuda, then mps, then cpu)")
    parser.add_argument("--batch-size", metavar="ROWS", type=int, default=DEFAULT_BATCH_ROWS,
                        help=f"captions per model-metric batch; the bar advances per batch (default: {DEFAULT_BATCH_ROWS})")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, and no line on the languages detected")
    parser.set_defaults(handler=run_score)


def read_rows(candidates: Path, references: Path | None, lang: str):
    """The rows of `caplens score`: `scoring.corpus.manifest.read_score_rows`, as in the app,
    each with its language (a row's own, else `lang`; "auto" detects it as the app does)."""
    from scoring.corpus.manifest import read_score_rows
    from scoring.language_id import check_language, resolve_language

    for path in (candidates, references):
        if path is not None and not path.is_file():
            raise FileNotFoundError(f"{'ROWS' if path is candidates else 'REFS_JSON'} not found: {path}")
    rows = read_score_rows([candidates] + ([references] if references else []), lang=check_language(lang))
    if not rows:
        raise ValueError(f"{candidates}: no candidates")
    resolved = []
    for row in rows:
        if row.problem:
            raise ValueError(f"{candidates.name} row {row.row}: {row.problem}")
        if not row.candidate.strip():  # the app and score-corpus refuse it too
            raise ValueError(f"{candidates.name} row {row.row}: empty caption")
        try:
            resolved.append(dataclasses.replace(row, lang=resolve_language(row.lang, row.candidate)))
        except ValueError as exc:
            raise ValueError(f"{candidates.name} row {row.row}: {exc}") from None
    return resolved


def find_image(image_dir: Path, image_id: str) -> Path:
    direct = image_dir / image_id
    if direct.is_file():
        return direct
    for ext in IMAGE_EXTENSIONS:
        for candidate in (image_dir / f"{image_id}{ext}", image_dir / f"{image_id}{ext.upper()}"):
            if candidate.is_file():
                return candidate
    if Path(image_id).suffix.lower() in IMAGE_EXTENSIONS:  # a file name: no extension is added to it
        raise FileNotFoundError(f"no image for id {image_id!r} in {image_dir} (no file of that name there)")
    raise FileNotFoundError(f"no image for id {image_id!r} in {image_dir} (tried {image_id} and {image_id}.jpg/.png/…)")


def checked_image(image_dir: Path, image_id: str, where: str) -> Path:
    """The row's image file, its header read under the image limits first, so that a file that
    is no image is named with its row (the scorer, given the bytes, could only say "<bytes>")."""
    from scoring.images import ImageDecodeError, check_image_file

    path = find_image(image_dir, image_id)
    try:
        check_image_file(path, path.name)
    except ImageDecodeError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return path


def choose_profile(requested: str | None, device: str | None, command: str = "caplens score"):
    """The scorer of the profile `caplens serve` would choose (`scoring.profile_choice`), with
    the same line on stderr, after ``command``, when it is not the hub's."""
    from scoring.api import get_scorer
    from scoring.backbones import select_placement
    from scoring.profile_choice import choice_line, choose_profile as choose, needs_saying

    # A device this machine lacks is the user's error, not the network's: checked before the
    # profiles are tried, whose failure would otherwise be reported as "offline".
    select_placement(device)
    choice = choose(requested, lambda profile, items, metrics: get_scorer(profile, device).score(items, metrics))
    if needs_saying(choice):
        print(f"{command}: {choice_line(choice)}", file=sys.stderr, flush=True)
    return get_scorer(choice.profile, device)


def run_score(args: argparse.Namespace) -> int:
    from scoring.api import ScoreItem

    if not args.image_dir.is_dir():
        raise FileNotFoundError(f"IMAGE_DIR is not a folder: {args.image_dir}")
    if args.batch_size < 1:
        raise ValueError("--batch-size must be at least 1")
    rows = read_rows(args.candidates, args.references, args.lang)
    ids = [row.id for row in rows]
    has_references = any(row.references for row in rows)
    images: dict[str, Path] = {}  # each file's header read once here
    for row in rows:
        if row.image not in images:
            images[row.image] = checked_image(args.image_dir, row.image, f"{args.candidates.name} row {row.row}")
    items = [ScoreItem(image=images[row.image], candidate=row.candidate, references=row.references, lang=row.lang,
                       image_id=row.id) for row in rows]
    scorer = choose_profile(args.profile, args.device)
    if args.metrics:
        names = [scorer.canonical_name(n) for n in args.metrics.split(",") if n.strip()]
        if not names:
            raise ValueError("--metrics names no metric")
        needing = [n for n in names if scorer.info(n).needs_references]
        if needing and not has_references:
            raise ValueError(f"{', '.join(needing)} need references: pass --references REFS_JSON")
    else:
        names = [n for n in scorer.metric_names() if has_references or not scorer.info(n).needs_references]
    if args.lang.strip().lower() == "auto" and not args.quiet:
        found = Counter(row.lang for row in rows)
        print("caplens score: languages detected: " + ", ".join(f"{code} {n}" for code, n in found.most_common())
              + " (--lang CODE sets one for rows without a lang column)", file=sys.stderr, flush=True)
    frequencies, notes = _cider_document_frequencies(scorer, rows, names)
    results = score_in_batches(scorer, items, names, args.batch_size, show_progress=not args.quiet,
                               cider_document_frequency=frequencies)
    notes = _value_notes(scorer, rows, results, notes, has_references)
    for name, result in results.items():
        if result.unavailable:
            print(f"{name}: unavailable: {result.unavailable}")
        elif result.aggregate is None:
            print(f"{name}: n/a (no item has what it needs)")
        else:
            print(f"{name}: {result.aggregate:.4f}" + (f" ({notes[name]})" if name in notes else ""))
    if args.out:
        per_item = {
            image_id: {name: result.values[i] for name, result in results.items()} for i, image_id in enumerate(ids)
        }
        payload = {
            "profile": scorer.profile,
            "metrics": {
                name: {
                    "aggregate": r.aggregate, "unavailable": r.unavailable, "backbone": r.backbone,
                    "note": notes.get(name),
                    "truncated": [ids[i] for i, t in enumerate(r.truncated) if t],
                }
                for name, r in results.items()
            },
            "items": per_item,
            "languages": {image_id: row.lang for image_id, row in zip(ids, rows)},
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    return 0


def _value_notes(scorer, rows, results: dict, notes: dict[str, str], has_references: bool) -> dict[str, str]:
    """What the Score tab says beside an available metric's values (the one status rule,
    `metric_availability`): `notes` (CIDEr-D's), captions in a language it was not made for,
    captions it reads as one word, scores clipped to 0; per metric that has any."""
    from scoring.session_scoring import HAS_REFERENCES, metric_availability, metric_meta

    table = [{"#": k + 1, "lang": row.lang, HAS_REFERENCES: bool(row.references),
              **{name: result.values[k] for name, result in results.items()}} for k, row in enumerate(rows)]
    meta = {name: metric_meta(scorer, name, result) for name, result in results.items()}
    said = {}
    for entry in metric_availability(list(results), meta, table, has_references, True, notes):
        if entry["status"].startswith("available; "):
            said[entry["metric"]] = entry["status"].removeprefix("available; ")
    return said


def _cider_document_frequencies(scorer, rows, names: list[str]):
    """CIDEr-D's document frequencies over the run's images (each image's references once) and
    the note the app's Score tab shows beside it ("not meaningful: ..." for one image), per CIDEr
    metric asked for; (None, {}) without one, or without Java (CIDEr-D then says why)."""
    from scoring.session_scoring import batch_document_frequencies, document_frequency_note

    cider = [n for n in names if scorer.registry.metrics[n].family == "cider"]
    sets = list(dict.fromkeys((row.image, tuple(row.references)) for row in rows if row.references))
    source = batch_document_frequencies([refs for _, refs in sets]) if cider and sets else None
    if source is None:
        return None, {}
    return source.frequencies, {name: document_frequency_note(source) for name in cider}


def score_in_batches(scorer, items: list, names: list[str], batch_size: int, show_progress: bool = True,
                     cider_document_frequency=None) -> dict:
    """Model metrics in batches of `batch_size` captions, the toolkit's n-gram metrics in one
    call over all items (their corpus values and CIDEr-D's IDF need every item at once; or the
    IDF from `cider_document_frequency`), with one tqdm bar on stderr counting scores
    (captions × metrics), the model loading included."""
    from tqdm import tqdm

    from scoring.api import MetricResult, freeze_long_lived_objects

    def uses_model(name: str) -> bool:
        spec = scorer.registry.metrics[name]
        return bool(spec.backbone or spec.vision_backbone)

    model_names = [n for n in names if uses_model(n)]
    text_names = [n for n in names if not uses_model(n)]
    results: dict[str, MetricResult] = {}
    with tqdm(total=len(items) * len(names), unit="score", desc="loading models", file=sys.stderr,
              disable=not show_progress, dynamic_ncols=True) as bar:
        if model_names:
            scorer.warm_up(model_names)
            freeze_long_lived_objects()  # the models live as long as the run: no full collection walks them
        done = 0

        def call(chunk: list, chosen: list[str]) -> dict:
            nonlocal done
            start = done

            def progress(fraction: float, desc: str = "") -> None:
                if desc and desc != "done":
                    bar.set_description(desc, refresh=False)
                bar.n = start + round(fraction * len(chunk) * len(chosen))
                bar.refresh()

            out = scorer.score(chunk, chosen, progress=progress, cider_document_frequency=cider_document_frequency)
            done = start + len(chunk) * len(chosen)
            return out

        for first in range(0, len(items), batch_size) if model_names else ():
            for name, part in call(items[first: first + batch_size], model_names).items():
                merged = results.setdefault(name, MetricResult(name, [], part.unavailable, [], part.backbone))
                merged.values.extend(part.values)
                merged.truncated.extend(part.truncated or [False] * len(part.values))
        if text_names:
            results.update(call(items, text_names))
    for name in model_names:  # model metrics' corpus value is the mean of the items' values
        values = [v for v in results[name].values if v is not None]
        if results[name].unavailable is None and values:
            results[name].aggregate = sum(values) / len(values)
    return {name: results[name] for name in scorer.metric_names() if name in results}
