"""The reliability table (issue 15): a crowd of annotators during a big import, a killed
import, the big export's memory, and each bad-input class, in ONE markdown table.

    python benchmarks/bench_reliability.py                       # 200,000-row import
    python benchmarks/bench_reliability.py --rows 50000 --export-rows 22000

What runs, all in a throwaway data directory with a SQLite database (WAL):
- the crowd: `--annotators` threads (default 16), each acting as the web server does for its own
  account: log in (`auth_sessions.log_in`), then per item resolve the session token and ask for
  the next item (`queue_screens.rating_screen`), resolve it again and rate (`queue_screens.rate`),
  logging in again every `RELOGIN_EVERY` items. They work on `--items` items with k = 3 while a
  separate process imports `--rows` rows with `caplens db import` (batched staging, one
  publishing step); latencies count only while that process runs. When it has finished, the
  crowd drains the queue, and the table reports ratings stored against items x k and how many
  items have exactly k.
- a killed import: `caplens db import` of `--kill-rows` rows gets SIGKILL after its first
  committed staging batch; the table reports rows of that import in tables users read (the
  staging rows stay invisible, and `caplens db gc` deletes them).
- the big export's peak RSS: `bench_export_memory.measure_export(--export-rows, "hf")`.
- bad inputs, each through the library function or middleware that handles it.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

K = 3
RELOGIN_EVERY = 25
ARRIVAL_S = 0.5  # annotator i starts i x this after the import
THINK_S = 1.0  # an annotator's pause before rating and after (a person needs several seconds per item)
PASSWORD = "a long enough password"


def _png(colour, size=(32, 24)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "PNG")
    return buffer.getvalue()


def _env(data: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "CAPLENS_DATA_DIR": str(data),
            "CAPLENS_DATABASE_URL": f"sqlite:///{data / 'caplens.db'}"}


def _write_import(folder: Path, rows: int, images: int = 200) -> Path:
    """A JSONL import of `rows` candidate captions, each rated once, over `images` images."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(images):
        (folder / f"{i}.png").write_bytes(_png((i % 256, (i * 7) % 256, 90)))
    path = folder / "big.jsonl"
    with path.open("w") as handle:
        for i in range(rows):
            handle.write(json.dumps({"image": f"{i % images}.png", "caption": f"caption {i} of a square",
                                     "caption_id": f"c{i}", "annotator": f"rater{i % 7}",
                                     "score": (i % 10) / 10}) + "\n")
    return path


def _visible_counts(engine) -> dict:
    from sqlalchemy import func, select

    from db.models import STAGING_TABLES, Base
    from db.session import session_scope

    with session_scope(engine, read_only=True) as s:
        return {name: s.execute(select(func.count()).select_from(table)).scalar()
                for name, table in Base.metadata.tables.items() if name not in STAGING_TABLES}


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else (values[0] if values else float("nan"))


def crowd_during_import(data: Path, annotators: int, items: int, rows: int) -> dict:
    from sqlalchemy import func, select

    from annotation.accounts import create_user
    from annotation.auth_sessions import log_in, session_account
    from annotation.database import database_url
    from annotation.errors import user_message
    from annotation.importers import import_rows
    from annotation.queue_screens import rate, rating_screen
    from db.models import Caption, Collection, Rating, User
    from db.session import get_engine, session_scope, upgrade

    url = database_url()
    upgrade(url)
    engine = get_engine(url)
    images = data.parent / "crowd-images"
    images.mkdir()
    for i in range(10):
        (images / f"{i}.png").write_bytes(_png((20 * i, 200, 40)))
    with session_scope(engine) as s:
        rita = create_user(s, "rita", "researcher", PASSWORD)
        import_rows(s, rita, [{"image": f"{i % 10}.png", "caption": f"crowd item {i}"} for i in range(items)],
                    collection="crowd", base_dir=images)
        names = [create_user(s, f"annotator{i}", "annotator", PASSWORD).name for i in range(annotators)]
    big = _write_import(data.parent / "big", rows)
    latencies: dict[str, list[float]] = {"login": [], "next_item": [], "rate": []}
    calls: list[tuple[str, float, float]] = []  # (op, start, end) during the import
    errors: list[str] = []
    importing = threading.Event()
    importing.set()

    def timed(op: str, fn, *args):
        started = time.perf_counter()
        try:
            return fn(*args)
        except Exception as exc:
            errors.append(f"{op}: {user_message(exc)} (after {time.perf_counter() - started:.1f} s)")
            return None
        finally:
            if importing.is_set():
                latencies[op].append(time.perf_counter() - started)
                calls.append((op, started, time.perf_counter()))

    def annotator(name: str, arrival: float) -> None:
        time.sleep(arrival)  # annotators arrive over the first seconds, not all in the same instant
        token, iteration = None, 0
        while True:
            if token is None or iteration % RELOGIN_EVERY == 0:
                login = timed("login", log_in, name, PASSWORD, f"10.0.0.{sum(map(ord, name)) % 250}")
                if login is None:
                    time.sleep(1)
                    continue
                token = login.token
            iteration += 1
            screen = timed("next_item", lambda: rating_screen(session_account(token).id, "crowd"))
            if screen is None:
                time.sleep(THINK_S)
                continue
            if screen.caption_id is None:
                if not importing.is_set():
                    return  # the queue is drained and the import is over
                time.sleep(1)
                continue
            time.sleep(THINK_S)
            timed("rate", lambda: rate(session_account(token).id, screen.caption_id, 0.5))
            time.sleep(THINK_S)

    threads = [threading.Thread(target=annotator, args=(name, ARRIVAL_S * i), daemon=True)
               for i, name in enumerate(names)]
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "db", "import", str(big), "--collection", "big",
                             "--user", "rita"], env=_env(data), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for thread in threads:
        thread.start()
    stages: dict[str, float] = {}
    err_lines = []
    for line in proc.stderr:  # progress lines: when checking, writing (staging) and publishing began
        err_lines.append(line)
        stages.setdefault(line.split(" ")[0], time.perf_counter())
    out = proc.stdout.read()
    proc.wait()
    err = "".join(err_lines)
    import_seconds = time.perf_counter() - started
    publish_began = stages.get("publishing", time.perf_counter())
    ended = time.perf_counter()
    outside = {op: [end - start for o, start, end in calls if o == op and (end < publish_began or start > ended)]
               for op in latencies}
    overlapping = sum(1 for _o, start, end in calls if end >= publish_began and start <= ended)
    importing.clear()
    for thread in threads:
        thread.join(timeout=600)
    import_ok = proc.returncode == 0
    imported = json.loads(out)["counts"] if import_ok else {"error": err.strip().splitlines()[-1:]}
    with session_scope(engine, read_only=True) as s:
        crowd = select(Caption.id).where(Caption.collections.any(Collection.name == "crowd"))
        per_item = dict(s.execute(select(Rating.caption_id, func.count(Rating.id))
                                  .where(Rating.caption_id.in_(crowd)).group_by(Rating.caption_id)).all())
        big_ratings = s.scalar(select(func.count(Rating.id)).join(User, User.id == Rating.annotator_id)
                               .where(User.name.like("rater%")))
    return {"annotators": annotators, "items": items, "stored": sum(per_item.values()),
            "exactly_k": sum(1 for n in per_item.values() if n == K), "over_k": sum(1 for n in per_item.values() if n > K),
            "latencies": latencies, "errors": errors, "import_ok": import_ok, "import_seconds": import_seconds,
            "imported": imported, "big_ratings": big_ratings, "rows": rows, "outside_publish": outside,
            "publish_seconds": ended - publish_began, "during_publish": overlapping,
            "stage_seconds": {name: round(at - started, 1) for name, at in stages.items()}}


def killed_import(data: Path, rows: int) -> dict:
    from annotation.database import database_url
    from db.session import get_engine

    engine = get_engine(database_url())
    source = _write_import(data.parent / "killed", rows, images=50)
    before = _visible_counts(engine)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "db", "import", str(source), "--collection", "killed",
                             "--user", "rita"], env=_env(data), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    killed_at = None
    for line in proc.stderr:
        stage, _, progress = line.strip().partition(" ")
        if stage == "writing" and int(progress.split("/")[0]) >= 500:
            proc.send_signal(signal.SIGKILL)
            killed_at = line.strip()
            break
    proc.wait(timeout=600)
    after = _visible_counts(engine)
    partial = sum(after[name] - before[name] for name in after)
    gc = subprocess.run([sys.executable, "-m", "app.cli", "db", "gc", "--staging-idle-minutes", "0"],
                        env=_env(data), cwd=ROOT, capture_output=True, text=True)
    return {"rows": rows, "killed_at": killed_at, "returncode": proc.returncode, "partial": partial,
            "gc": gc.stdout.strip()}


def big_export(rows: int) -> dict:
    """`measure_export` from a fresh interpreter: Linux carries a parent's peak RSS into its
    children's `ru_maxrss`, and this process has held the crowd and the import by now."""
    env = {k: v for k, v in os.environ.items() if k != "CAPLENS_DATABASE_URL"}  # it builds its own database
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); from bench_export_memory import measure_export; "
            f"print(json.dumps(measure_export({int(rows)}, 'hf', image_side=32)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _huge_png_header(width: int, height: int) -> bytes:
    """A valid PNG signature and IHDR declaring width x height, and a tiny IDAT."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def _outcome(fn, done: str = "accepted") -> str:
    """What the library did with a bad input: refused with its user message, or `done`
    (accepted, or how it was contained) with what the check function saw."""
    from annotation.errors import user_message

    try:
        result = fn()
    except Exception as exc:
        return f"refused: {user_message(exc)}"
    return f"{done}: {result}"


def bad_inputs(data: Path) -> list[tuple[str, str]]:
    from sqlalchemy import select, update

    from annotation.auth_sessions import TooManyAttempts, log_in, log_out, session_account
    from annotation.database import database_session
    from annotation.image_store import inspect_image
    from db.models import AuthSession, User, utcnow
    from scoring.archives import extract_zip
    from scoring.csv_safe import read_csv_frame, write_csv

    work = Path(tempfile.mkdtemp(prefix="bad-", dir=data.parent))
    results = []
    good = _png((1, 2, 3))
    results.append(("broken image (PNG cut in half)", _outcome(lambda: inspect_image(good[: len(good) // 2], "cut.png"))))
    results.append(("oversized pixels (PNG header 30000 x 30000, 0.1 KB)",
                    _outcome(lambda: inspect_image(_huge_png_header(30000, 30000), "huge.png"))))

    def html_caption():
        from annotation.acting import acting
        from annotation.importers import import_rows

        (work / "x.png").write_bytes(good)
        html = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
        with database_session(read_only=True) as session:
            rita = session.scalar(select(User.id).where(User.name == "rita"))
        with acting(rita) as (session, user):  # the researcher
            report = import_rows(session, user, [{"image": "x.png", "caption": html}], collection="html",
                                 base_dir=work)
        from annotation.captions import get_collection
        with acting(rita, read_only=True) as (session, _user):
            stored = get_collection(session, "html").captions[0].text
        return f"stored as plain text, unchanged ({stored == html}); import #{report.import_id}"

    results.append(("HTML in a caption", _outcome(html_caption)))
    bomb = work / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.bin", b"\0" * (512 << 20))
    results.append((f"zip bomb ({bomb.stat().st_size / 1024:.0f} KB unpacking to 512 MB)",
                    _outcome(lambda: extract_zip(bomb, work / "bomb-out")) +
                    f"; files extracted: {sum(1 for _ in (work / 'bomb-out').rglob('*')) if (work / 'bomb-out').exists() else 0}"))
    slip = work / "slip.zip"
    with zipfile.ZipFile(slip, "w") as archive:
        archive.writestr("ok.txt", "fine")
        archive.writestr("../escaped.txt", "outside")
    results.append(("`../` zip member", _outcome(lambda: extract_zip(slip, work / "slip-out")) +
                    f"; file outside written: {(work / 'escaped.txt').exists()}"))

    def formula():
        out = work / "f.csv"
        cell = '=HYPERLINK("http://evil.example","click")'
        write_csv(out, ["caption"], [{"caption": cell}])
        raw = out.read_text().splitlines()[1]
        back = read_csv_frame(out)["caption"][0]
        return f"written as {raw[:12]}..., read back unchanged ({back == cell})"

    results.append(("formula cell in a CSV export", _outcome(formula, "escaped")))

    def throttled():
        outcomes = []
        for _ in range(8):
            try:
                log_in("rita", "wrong password", "203.0.113.9")
                outcomes.append("in")
            except TooManyAttempts as exc:
                outcomes.append(f"throttled({exc.retry_after}s)")
            except PermissionError:
                outcomes.append("wrong")
        try:
            log_in("rita", PASSWORD, "203.0.113.9")
            right = "the right password logged in"
        except TooManyAttempts:
            right = "even the right password waits"
        return f"{', '.join(outcomes)}; then {right}"

    results.append(("wrong password x 8", _outcome(throttled, "throttled")))

    def replayed():
        login = log_in("annotator0", PASSWORD, "198.51.100.7")
        log_out(login.token)
        first = _outcome(lambda: session_account(login.token).name)
        other = log_in("annotator1", PASSWORD, "198.51.100.7")
        with database_session() as session:
            session.execute(update(AuthSession).values(expires_at=utcnow() - timedelta(seconds=1)))
        second = _outcome(lambda: session_account(other.token).name)
        return f"after logout: {first} | after expiry: {second}"

    results.append(("replayed / expired session token", replayed()))

    def hidden_endpoint():
        from starlette.applications import Starlette
        from starlette.responses import PlainTextResponse
        from starlette.routing import Route
        from starlette.testclient import TestClient

        from app.access import Guard

        async def inner(_request):
            return PlainTextResponse("reached the handler")

        app = Guard(Starlette(routes=[Route("/{path:path}", inner, methods=["GET", "POST"])]))
        client = TestClient(app)
        codes = {path: client.post(path).status_code for path in
                 ("/gradio_api/call/save_perturbations", "/gradio_api/run/predict", "/gradio_api/api/predict",
                  "/gradio_api/call/next_item")}
        return ", ".join(f"{path} -> {code}" for path, code in codes.items())

    results.append(("hidden internal endpoint (real `app.access.Guard`)", _outcome(hidden_endpoint, "internal ones 404, the public one passes")))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the big import")
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--items", type=int, default=600, help="items of the crowd's queue (k = 3)")
    parser.add_argument("--kill-rows", type=int, default=20_000)
    parser.add_argument("--export-rows", type=int, default=22_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="caplens-bench-reliability-"))
    data = work / "data"
    os.environ.update(_env(data))
    began = time.perf_counter()
    crowd = crowd_during_import(data, args.annotators, args.items, args.rows)
    print(f"crowd done in {time.perf_counter() - began:.0f}s", file=sys.stderr, flush=True)
    killed = killed_import(data, args.kill_rows)
    print("killed import done", file=sys.stderr, flush=True)
    bad = bad_inputs(data)
    print("bad inputs done", file=sys.stderr, flush=True)
    export = big_export(args.export_rows)
    lat = crowd["latencies"]
    rows = [
        ("concurrent annotators (threads, each its own account and session)", str(crowd["annotators"])),
        (f"ratings stored of expected ({crowd['items']} items x k={K})",
         f"{crowd['stored']:,} of {crowd['items'] * K:,}"),
        (f"items at exactly k={K}", f"{crowd['exactly_k']} of {crowd['items']} (over k: {crowd['over_k']})"),
        (f"big import while they work ({crowd['rows']:,} rows, `caplens db import`)",
         (f"done in {crowd['import_seconds']:.0f} s: {crowd['imported'].get('captions', 0):,} captions, "
          f"{crowd['imported'].get('ratings', 0):,} ratings (stored: {crowd['big_ratings']:,})")
         if crowd["import_ok"] else f"FAILED: {crowd['imported']}"),
    ]
    stages = crowd["stage_seconds"]
    rows.append(("import stages (s after start: checking / staging batches / publishing step)",
                 f"{stages.get('checking', '-')} / {stages.get('writing', '-')} / {stages.get('publishing', '-')}; "
                 f"publishing and staging clean-up took {crowd['publish_seconds']:.1f} s"))
    for op in ("login", "next_item", "rate"):
        values, calm = lat[op], crowd["outside_publish"][op]
        rows.append((f"p95 latency of {op} during the import (all calls / calls not overlapping publishing and clean-up)",
                     f"{_p95(values):.2f} s, max {max(values):.2f} s, {len(values)} calls / "
                     f"{_p95(calm):.2f} s, max {max(calm):.2f} s, {len(calm)} calls" if values and calm else
                     f"{len(values)} calls"))
    rows.append(("calls overlapping publishing and clean-up", str(crowd["during_publish"])))
    rows.append(("errors seen by the crowd", f"{len(crowd['errors'])}" +
                 (f": {sorted(set(crowd['errors']))[:3]}" if crowd["errors"] else "")))
    rows.append((f"partial rows after a killed import ({killed['rows']:,} rows, SIGKILL at "
                 f"'{killed['killed_at']}')", f"{killed['partial']} (gc: {killed['gc']})"))
    rows.append((f"peak RSS of the big export ({export['rows']:,} ratings, Hugging Face dataset)",
                 f"{export['peak_rss_mb']:,.0f} MB in {export['seconds']} s, exported {export['exported']}"
                 if not export["error"] else f"FAILED: {export['error']}"))
    rows.extend((f"bad input: {name}", outcome) for name, outcome in bad)
    print("| check | outcome |")
    print("|---|---|")
    for name, outcome in rows:
        print(f"| {name} | {outcome.replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
