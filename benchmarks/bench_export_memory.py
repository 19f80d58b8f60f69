"""Peak memory of exporting ratings, per format: the export runs in a child process and its
peak resident set (ru_maxrss of that child, from wait4) is reported with the time it took.
The database is built by another child, so this process stays small: Linux carries the
spawning process's peak RSS into the child's ru_maxrss across fork/exec.

The database is built once per size in a throwaway data directory by bulk inserts: 5
annotators rate every candidate caption, 5 candidates and 2 references per image (small
distinct PNGs in the image store), two cached metric scores per caption, one collection.

    python benchmarks/bench_export_memory.py --rows 22000 200000 --formats csv jsonl parquet hf
    python benchmarks/bench_export_memory.py --rows 22000 --formats hf --image-side 256   # ~40 KB photos
    python benchmarks/bench_export_memory.py --rows 22000 --code /path/to/other/checkout   # compare

`measure_export(rows, fmt)` is the same measurement for other scripts (the reliability table):
it returns {"rows", "format", "peak_rss_mb", "seconds", "exported", "error"}. Each export is
deleted once measured; the databases when the process exits.
"""
from __future__ import annotations

import argparse
import atexit
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the children import CapLens from `code` (default: here)

ANNOTATORS = 5
CANDIDATES_PER_IMAGE = 5
REFERENCES_PER_IMAGE = 2
METRICS = (("CLIP-S", "bench-fp-clip"), ("BLEU-4", "bench-fp-bleu"))
INSERT_BATCH = 10_000
FORMATS = ("csv", "jsonl", "parquet", "hf")
_BUILT: dict[tuple[int, int], Path] = {}


def _image(number: int, side: int) -> tuple[bytes, str, int, int]:
    """Image `number`: a flat-coloured PNG (side <= 64) or a noisy JPEG photo stand-in, so its
    bytes are like a camera image's (about 40 KB at side 256); (bytes, format, width, height)."""
    from PIL import Image

    width, height = side, side * 3 // 4
    colour = (number % 256, (number // 256) % 256, (number // 65536) % 256)
    buffer = io.BytesIO()
    if side <= 64:
        Image.new("RGB", (width, height), colour).save(buffer, "PNG")
        return buffer.getvalue(), "PNG", width, height
    noise = Image.effect_noise((width, height), 60).convert("RGB")
    Image.blend(noise, Image.new("RGB", (width, height), colour), 0.5).save(buffer, "JPEG", quality=90)
    return buffer.getvalue(), "JPEG", width, height


def build_database(data_dir: Path, ratings: int, image_side: int = 32) -> Path:
    """A migrated SQLite database in `data_dir` holding `ratings` ratings (a multiple of 5)
    whose images are `image_side` pixels wide."""
    os.environ["CAPLENS_DATA_DIR"] = str(data_dir)
    from sqlalchemy import insert

    from annotation.database import database_url
    from annotation.image_store import ImageFacts, write_to_store
    from db.models import Caption, Collection, Image, MetricScore, Rating, User, collection_captions
    from db.session import get_engine, session_scope, upgrade
    from scoring.fingerprint import content_fingerprint

    url = database_url()
    upgrade(url)
    captions = -(-ratings // ANNOTATORS)
    images = -(-captions // CANDIDATES_PER_IMAGE)
    now = datetime.now(timezone.utc)
    with session_scope(get_engine(url)) as session:
        session.execute(insert(User), [{"id": i + 1, "name": f"annotator{i}", "role": "annotator", "created_at": now}
                                       for i in range(ANNOTATORS)] + [
            {"id": ANNOTATORS + 1, "name": "researcher", "role": "researcher", "created_at": now}])
        session.execute(insert(Collection), [{"id": 1, "name": "bench", "created_at": now}])
        image_rows = []
        for number in range(images):
            data, fmt, width, height = _image(number, image_side)
            facts = ImageFacts(content_fingerprint(data), fmt, width, height, len(data))
            write_to_store(data, facts)
            image_rows.append({"id": number + 1, "sha256": facts.sha256, "format": fmt, "width": width,
                               "height": height, "size_bytes": len(data), "original_filename": f"image{number}",
                               "created_at": now})
        _insert(session, Image, image_rows)
        caption_rows, links, scores, rating_rows = [], [], [], []
        caption_id = 0
        for image in range(1, images + 1):
            for r in range(REFERENCES_PER_IMAGE):
                caption_id += 1
                caption_rows.append({"id": caption_id, "image_id": image, "text": f"reference {r} of picture {image}",
                                     "language": "en", "kind": "reference", "created_at": now})
                links.append({"collection_id": 1, "caption_id": caption_id})
            for c in range(CANDIDATES_PER_IMAGE):
                caption_id += 1
                caption_rows.append({"id": caption_id, "image_id": image, "language": "en", "kind": "candidate",
                                     "text": f"a photo of thing {c} in picture {image}, seen from the side",
                                     "source_model": f"model-{c}", "created_at": now})
                links.append({"collection_id": 1, "caption_id": caption_id})
                scores += [{"caption_id": caption_id, "metric": metric, "checkpoint_fingerprint": fp,
                            "value": (caption_id % 97) / 97, "computed_at": now} for metric, fp in METRICS]
                rating_rows += [{"caption_id": caption_id, "annotator_id": a + 1,
                                 "overall": ((caption_id + a) % 11) / 10, "version": 1, "created_at": now,
                                 "updated_at": now} for a in range(ANNOTATORS)]
        _insert(session, Caption, caption_rows)
        _insert(session, collection_captions, links)
        _insert(session, MetricScore, scores)
        _insert(session, Rating, rating_rows[:ratings])
    return data_dir


def _insert(session, table, rows: list[dict]) -> None:
    from sqlalchemy import insert

    for start in range(0, len(rows), INSERT_BATCH):
        session.execute(insert(table), rows[start:start + INSERT_BATCH])


def _child(task: str, data_dir: str, *args: str) -> None:
    """A child process: `build DATA_DIR ROWS IMAGE_SIDE`, or the measured `export DATA_DIR FORMAT OUT`
    (every rating, as the researcher)."""
    if task == "build":
        build_database(Path(data_dir), int(args[0]), int(args[1]))
        return
    fmt, out = args
    os.environ["CAPLENS_DATA_DIR"] = data_dir
    from sqlalchemy import select

    from annotation.database import database_session
    from annotation.transfer.exporters import export_table
    from db.models import User

    with database_session(read_only=True) as session:
        researcher = session.scalar(select(User).where(User.name == "researcher"))
        summary = export_table(session, researcher, "ratings", out, fmt)
    print(json.dumps({"exported": summary["rows"]}))


def _run(code: Path, data_dir: Path, log: Path, *args: str) -> tuple[int, float, float, list[str]]:
    """(exit code, peak RSS in MB, seconds, output lines) of `_child(*args)` run by `code`."""
    environment = {**os.environ, "CAPLENS_DATA_DIR": str(data_dir), "HF_DATASETS_OFFLINE": "1",
                   "HF_HOME": str(data_dir.parent / "hf-home"), "PYTHONPATH": str(code)}
    script = (f"import sys; sys.path.insert(0, {str(code)!r}); sys.path.insert(1, {str(Path(__file__).parent)!r}); "
              f"import bench_export_memory as b; b._child(*sys.argv[1:])")
    start = time.perf_counter()
    with log.open("w") as handle:
        child = subprocess.Popen([sys.executable, "-c", script, *args], env=environment, cwd=code, stdout=handle,
                                 stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(child.pid, 0)  # the child's own resource usage, ru_maxrss in KiB
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss / 1024, seconds, log.read_text().strip().splitlines() or ["(no output)"]


def measure_export(rows: int, fmt: str, *, image_side: int = 32, work: Path | None = None,
                   code: Path = ROOT) -> dict:
    """Build (once per size and process) a database of `rows` ratings with images `image_side`
    pixels wide and export it as `fmt` in a child process running `code`; the child's peak
    RSS and wall time."""
    if (rows, image_side) not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix=f"caplens-bench-export-{rows}-", dir=work))
        status, _, _, lines = _run(ROOT, folder / "data", folder / "build.log", "build", str(folder / "data"),
                                   str(rows), str(image_side))
        if status != 0:
            raise RuntimeError(f"building the {rows}-rating database failed: {lines[-1]}")
        _BUILT[rows, image_side] = folder / "data"
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    data_dir = _BUILT[rows, image_side]
    out = Path(tempfile.mkdtemp(prefix="out-", dir=data_dir.parent)) / ("ratings" if fmt == "hf" else f"ratings.{fmt}")
    status, peak, seconds, lines = _run(code, data_dir, out.parent / "child.log", "export", str(data_dir), fmt,
                                        str(out))
    shutil.rmtree(out.parent, ignore_errors=True)
    result = {"rows": rows, "format": fmt, "image_side": image_side, "peak_rss_mb": round(peak, 1),
              "seconds": round(seconds, 1), "exported": None, "error": None}
    if status == 0:
        result["exported"] = json.loads(lines[-1])["exported"]
    else:
        result["error"] = lines[-1][:300]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[22_000])
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--image-side", type=int, default=32,
                        help="image width in pixels: <= 64 flat PNGs (~100 bytes), else noisy JPEGs (~40 KB at 256)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the databases and exports (default: temp)")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose exporter runs (default: this one)")
    args = parser.parse_args()
    print("| ratings | images | format | peak RSS (MB) | seconds | exported |", flush=True)
    print("|---:|---|---|---:|---:|---|", flush=True)
    for rows in args.rows:
        for fmt in args.formats:
            r = measure_export(rows, fmt, image_side=args.image_side, work=args.work, code=args.code.resolve())
            done = r["exported"] if r["error"] is None else f"failed: {r['error']}"
            print(f"| {rows:,} | {args.image_side} px | {fmt} | {r['peak_rss_mb']:,.0f} | {r['seconds']} | {done} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
