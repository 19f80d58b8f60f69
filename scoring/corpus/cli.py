"""`caplens score-corpus`: score a whole corpus, streaming and resumable, locally or on Ray."""
from __future__ import annotations

import argparse
from pathlib import Path

from scoring.corpus import DEFAULT_BATCH_ROWS, ENGINES


def register(subparsers, parents) -> None:
    """Add `caplens score-corpus` to the `caplens` parser."""
    parser = subparsers.add_parser(
        "score-corpus",
        parents=parents,
        help="score a whole corpus (JSONL/CSV/Parquet manifest or COCO results), resumable, local or on Ray",
        description=(
            "Score every row of MANIFEST (JSONL, CSV or Parquet with image, candidate and optional references, "
            "id, model, lang; or a COCO results .json with --coco-annotations) into partitioned Parquet under "
            "--out, with an errors file and a per-model summary with bootstrap intervals. Running again "
            "resumes: rows already scored are skipped. See docs/corpus.md."
        ),
    )
    parser.add_argument("manifest", metavar="MANIFEST", type=Path)
    parser.add_argument("--out", metavar="DIR", type=Path, required=True, help="output folder (resumed if it exists)")
    parser.add_argument("--engine", choices=ENGINES, default="auto",
                        help="local: this process; ray: Ray Data actors; auto: ray when Ray is installed")
    parser.add_argument("--ray-address", metavar="ADDRESS",
                        help="join this Ray cluster (e.g. ray://head:10001 or auto); default: start a local Ray")
    parser.add_argument("--actors", metavar="N", type=int,
                        help="Ray actors scoring at once (default: one per GPU for CUDA, else one per CPU)")
    parser.add_argument("--metrics", metavar="NAMES", help="comma-separated metric names (default: every metric)")
    parser.add_argument("--profile", metavar="NAME", help="registry profile or .toml path (default: $CAPLENS_PROFILE or hub)")
    parser.add_argument("--device", help="torch device of each scorer (default: cuda, then mps, then cpu)")
    parser.add_argument("--batch-size", metavar="ROWS", type=int, default=DEFAULT_BATCH_ROWS,
                        help=f"manifest rows per batch (default: {DEFAULT_BATCH_ROWS})")
    parser.add_argument("--lang", metavar="CODE", default="en", help="language of rows without one (default: en)")
    parser.add_argument("--coco-annotations", metavar="JSON", type=Path, help="COCO captions annotations (references)")
    parser.add_argument("--image-root", metavar="DIR", type=Path,
                        help="folder image paths are relative to (default: the manifest's folder)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(handler=run_score_corpus)


def run_score_corpus(args: argparse.Namespace) -> int:
    from scoring.corpus import open_manifest, score_corpus

    manifest = open_manifest(args.manifest, coco_annotations=args.coco_annotations, image_root=args.image_root,
                             lang=args.lang)
    metrics = [m for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    report = score_corpus(manifest, args.out, profile=args.profile, metrics=metrics, device=args.device,
                          engine=args.engine, ray_address=args.ray_address, actors=args.actors,
                          batch_rows=args.batch_size, show_progress=not args.quiet)
    print(f"{report.total_rows} rows: {report.total_rows - report.errors} scored, {report.errors} not scored (why: "
          f"errors.jsonl); {report.scored_rows} of them handled by this run, {report.skipped_rows} by an earlier one "
          f"({report.engine} engine, {report.seconds:.1f} s)")
    for name, reason in report.unavailable.items():
        print(f"{name}: unavailable: {reason}")
    if len(report.summary):
        print(report.summary.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"scores: {report.out / 'scores'}  summary: {report.out / 'summary.csv'}")
    return 0
