"""The reliability table (issues 15 and 28): a crowd of annotators on the running web server
during a big import and without one, what anonymous requests cost that server, a killed import,
the big export's memory, and each bad-input class, in ONE markdown table.

    python benchmarks/bench_reliability.py                       # 200,000-row import
    python benchmarks/bench_reliability.py --rows 50000 --export-rows 22000

What runs, all in a throwaway data directory with a SQLite database (WAL):
- the crowd, over HTTP: `caplens serve --profile tiny --no-demo` in its own process, and
  `--annotators` clients (default 16, each its own connection, account and login through the
  page's login route and its cookie) taking items (/next_item) and rating them (/rate) on
  `--items` items with k = 3, `--think` seconds between actions, while `caplens db import`
  imports `--rows` rows in a third process; then again without an import for
  `--calm-seconds` at `--calm-think`. Latencies are of whole requests as the client sees them
  (one POST to the endpoints' direct route, /gradio_api/run), with the server, the clients and
  the import on one machine.
- anonymous costs, measured from outside the server: its RSS kept per /perturb call
  (`--anonymous-calls`, each from a new client, so each a new Gradio session), a 400 KB
  caption to /perturb, a 40-megapixel 16-bit PNG to /score, 40 simultaneous correct logins
  from one address.
- a killed import: `caplens db import` of `--kill-rows` rows gets SIGKILL after its first
  committed staging batch; the table reports rows of that import in tables users read (the
  staging rows stay invisible, and `caplens db gc` deletes them).
- the big export's peak RSS: `bench_export_memory.measure_export(--export-rows, "hf")`.
- bad inputs, each through the library function or middleware that handles it.
- exports left on disk: a researcher clicks Export (ratings, hf) 3 times in Chromium on a
  `--click-rows` collection, then the server gets SIGTERM (as a Space stops it); the bytes in
  its Gradio cache folder during and after (`--only-export-clicks` runs this part alone).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import signal
import math
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
    """The nearest-rank 95th percentile (a value that was measured; NaN without values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


# ---- the web server, driven over HTTP ---------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`caplens serve --profile tiny --no-demo` in its own process on a free port."""

    def __init__(self, data: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(data.parent / f"serve-{self.port}.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--profile", "tiny", "--no-demo",
                                      "--port", str(self.port)], env=_env(data), cwd=ROOT, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        import httpx

        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if httpx.get(self.url, timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"caplens serve exited: see {self.log.name}")
            time.sleep(1)
        raise RuntimeError("caplens serve did not answer in 300 s")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self, how: int = signal.SIGINT) -> None:
        self.proc.send_signal(how)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def call_direct(http, url: str, api_name: str, data: list, session_hash: str) -> tuple[bool, object]:
    """POST /gradio_api/run/<api_name>, the route of the endpoints that skip the queue (docs/app.md,
    *Direct HTTP*): (ok, data or error message)."""
    answer = http.post(f"{url}gradio_api/run/{api_name}", json={"data": data, "session_hash": session_hash})
    body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else answer.text
    if answer.status_code != 200 or not isinstance(body, dict) or "data" not in body:
        return False, body.get("error") if isinstance(body, dict) else f"HTTP {answer.status_code}: {str(body)[:200]}"
    return True, body["data"][0]


def call_api(http, url: str, api_name: str, data: list) -> tuple[bool, object]:
    """POST /gradio_api/call/<api_name> and read its event stream: (ok, data or error message)."""
    posted = http.post(f"{url}gradio_api/call/{api_name}", json={"data": data})
    if posted.status_code != 200:
        return False, f"HTTP {posted.status_code}: {posted.text[:200]}"
    event = None
    with http.stream("GET", f"{url}gradio_api/call/{api_name}/{posted.json()['event_id']}") as stream:
        for line in stream.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                body = json.loads(line[5:])
                if event == "error":
                    return False, body.get("error") if isinstance(body, dict) else body
                return True, body[0] if isinstance(body, list) and body else body
    return False, "no answer"


def crowd_over_http(data: Path, annotators: int, items: int, rows: int, think_s: float,
                    duration_s: float | None = None) -> dict:
    """`annotators` clients, each its own HTTP connection and login (the page's login route,
    its cookie), taking items (/next_item) and rating them (/rate) on a running `caplens
    serve`, while `caplens db import` imports `rows` rows in another process (rows 0: no
    import, the crowd works for `duration_s`). Latencies are of whole requests as a client
    sees them."""
    import httpx
    from sqlalchemy import func, select

    from annotation.people.accounts import create_user
    from annotation.database import database_url
    from annotation.transfer.importers import import_rows
    from db.models import Caption, Collection, Rating, User
    from db.session import get_engine, session_scope, upgrade

    url = database_url()
    upgrade(url)
    engine = get_engine(url)
    tag = f"crowd{int(time.time())}"
    images = data.parent / f"{tag}-images"
    images.mkdir()
    for i in range(10):
        (images / f"{i}.png").write_bytes(_png((20 * i, 200, 40)))
    with session_scope(engine) as s:
        rita = s.scalar(select(User).where(User.name == "rita")) or create_user(s, "rita", "researcher", PASSWORD)
        import_rows(s, rita, [{"image": f"{i % 10}.png", "caption": f"{tag} item {i}"} for i in range(items)],
                    collection=tag, base_dir=images)
        names = [create_user(s, f"{tag}-a{i}", "annotator", PASSWORD).name for i in range(annotators)]
    server = Server(data)
    latencies: dict[str, list[float]] = {"login": [], "next_item": [], "rate": []}
    errors: list[str] = []
    measuring = threading.Event()
    measuring.set()
    stop = threading.Event()

    def timed(op: str, fn):
        started = time.perf_counter()
        ok, body = fn()
        if measuring.is_set():
            latencies[op].append(time.perf_counter() - started)
        if not ok:
            errors.append(f"{op}: {body}")
        return ok, body

    def annotator(name: str, arrival: float) -> None:
        time.sleep(arrival)
        http = httpx.Client(timeout=120)
        iteration = 0
        while not stop.is_set():
            if iteration % RELOGIN_EVERY == 0:
                def login():
                    reply = http.post(f"{server.url}caplens/login", json={"name": name, "password": PASSWORD})
                    return reply.status_code == 200, reply.text
                if not timed("login", login)[0]:
                    time.sleep(1)
                    continue
            iteration += 1
            ok, item = timed("next_item", lambda: call_direct(http, server.url, "next_item", [tag], name))
            if not ok:
                time.sleep(think_s)
                continue
            if item["caption_id"] is None:
                if not measuring.is_set() or rows == 0:
                    return  # the queue is drained
                time.sleep(1)
                continue
            time.sleep(think_s)
            timed("rate", lambda: call_direct(http, server.url, "rate", [item["caption_id"], 0.5, None, None, None], name))
            time.sleep(think_s)

    threads = [threading.Thread(target=annotator, args=(name, ARRIVAL_S * i), daemon=True)
               for i, name in enumerate(names)]
    rss_before = server.rss_mb()
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    imported, import_ok = {}, True
    if rows:
        big = _write_import(data.parent / f"{tag}-big", rows)
        proc = subprocess.run([sys.executable, "-m", "app.cli", "db", "import", str(big), "--collection", f"{tag}-big",
                               "--user", "rita"], env=_env(data), cwd=ROOT, capture_output=True, text=True)
        import_ok = proc.returncode == 0
        imported = json.loads(proc.stdout)["counts"] if import_ok else {"error": proc.stderr.strip()[-300:]}
    else:
        time.sleep(duration_s or 120)
    measured_s = time.perf_counter() - started
    measuring.clear()
    if rows == 0:
        stop.set()
    for thread in threads:
        thread.join(timeout=900)
    rss_after = server.rss_mb()
    server.stop()
    with session_scope(engine, read_only=True) as s:
        crowd = select(Caption.id).where(Caption.collections.any(Collection.name == tag))
        per_item = dict(s.execute(select(Rating.caption_id, func.count(Rating.id))
                                  .where(Rating.caption_id.in_(crowd)).group_by(Rating.caption_id)).all())
    return {"annotators": annotators, "items": items, "rows": rows, "think_s": think_s, "latencies": latencies,
            "errors": errors, "import_ok": import_ok, "imported": imported, "measured_s": measured_s,
            "stored": sum(per_item.values()), "exactly_k": sum(1 for n in per_item.values() if n == K),
            "over_k": sum(1 for n in per_item.values() if n > K), "rss_mb": (rss_before, rss_after)}


def _png16_header(width: int, height: int) -> bytes:
    """A valid 16-bit greyscale PNG of width x height, all zeros, written row by row (a 40 MP
    one is about 80 KB)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    packer = zlib.compressobj(9)
    row = b"\0" * (1 + 2 * width)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 16, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def anonymous_costs(data: Path, calls: int = 300) -> list[tuple[str, str]]:
    """What anonymous requests cost the running server, measured from outside: memory kept per
    /perturb call, a 400 KB caption, a 40 MP 16-bit PNG to /score, and 40 simultaneous
    correct logins from one address."""
    import gc as _gc
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    from sqlalchemy import select

    from annotation.people.accounts import create_user
    from annotation.database import database_session
    from db.models import User

    with database_session() as session:
        names = [f"lab{i}-{int(time.time())}" for i in range(40)]
        for name in names:
            create_user(session, name, "annotator", PASSWORD)
        assert session.scalar(select(User).where(User.name == names[0])) is not None
    server = Server(data)
    results = []
    try:
        http = httpx.Client(timeout=300)
        for n in range(30):  # warm up: models, caches, first sessions
            call_api(http, server.url, "perturb", [f"a man rides a horse number {n}", "all", None, n, "en", ""])
        _gc.collect()
        time.sleep(2)
        before = server.rss_mb()
        for n in range(calls):
            call_api(httpx.Client(timeout=300), server.url, "perturb",
                     [f"a man rides a brown horse on the beach {n}", "all", None, n, "en", ""])
        time.sleep(2)
        after = server.rss_mb()
        results.append((f"server memory kept per anonymous /perturb call ({calls} calls, each its own client; "
                        f"RSS {before:.0f} -> {after:.0f} MB)", f"{(after - before) * 1024 / calls:.0f} KB"))
        before = server.rss_mb()
        started = time.perf_counter()
        ok, message = call_api(http, server.url, "perturb", ["a horse " * 50_000, "all", None, 0, "auto", ""])
        seconds = time.perf_counter() - started
        time.sleep(1)
        results.append(("a 400 KB caption to /perturb",
                        f"{'answered' if ok else 'refused'} in {seconds:.2f} s, RSS {server.rss_mb() - before:+.0f} MB: "
                        f"{str(message)[:90]}"))
        png = data.parent / "deep.png"
        png.write_bytes(_png16_header(8000, 5000))
        before = server.rss_mb()
        started = time.perf_counter()
        uploaded = http.post(f"{server.url}gradio_api/upload", files={"files": ("deep.png", png.read_bytes())}).json()[0]
        ok, message = call_api(http, server.url, "score", [{"path": uploaded, "meta": {"_type": "gradio.FileData"}},
                                                            "a grey square", "", "en", "BLEU-4"])
        seconds = time.perf_counter() - started
        results.append((f"a 40 MP 16-bit PNG ({png.stat().st_size / 1024:.0f} KB) to /score",
                        f"{'answered' if ok else 'refused'} in {seconds:.2f} s, RSS {server.rss_mb() - before:+.0f} MB: "
                        f"{str(message)[:110]}"))

        def log_in(name):
            started = time.perf_counter()
            reply = httpx.post(f"{server.url}caplens/login", json={"name": name, "password": PASSWORD}, timeout=120)
            return reply.status_code, time.perf_counter() - started

        with ThreadPoolExecutor(40) as pool:
            answers = list(pool.map(log_in, names))
        refused = sum(code != 200 for code, _ in answers)
        results.append(("40 simultaneous correct logins from one address (the page's login route)",
                        f"{refused} refused; slowest {max(s for _, s in answers):.2f} s"))
    finally:
        server.stop()
    return results


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


def _bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def exports_left_after_stop(data: Path, rows: int, clicks: int = 3) -> dict:
    """A researcher clicks Export (ratings, format hf) `clicks` times in Chromium on a running
    `caplens serve` (its own Gradio cache folder), which is then stopped with SIGTERM, as a
    Space, Docker or systemd stop it: bytes in that cache folder after the clicks and after
    the stop."""
    from playwright.sync_api import sync_playwright
    from sqlalchemy import select

    from annotation.people.accounts import create_user
    from annotation.database import database_url
    from annotation.transfer.importers import import_rows
    from db.models import User
    from db.session import get_engine, session_scope, upgrade

    url = database_url()
    upgrade(url)
    tag = f"export{int(time.time())}"
    images = data.parent / f"{tag}-images"
    images.mkdir()
    for i in range(50):
        (images / f"{i}.png").write_bytes(_png((5 * i, 90, 200), (320, 240)))
    with session_scope(get_engine(url)) as s:
        rita = s.scalar(select(User).where(User.name == "rita")) or create_user(s, "rita", "researcher", PASSWORD)
        import_rows(s, rita, [{"image": f"{i % 50}.png", "caption": f"{tag} item {i}", "caption_id": f"c{i}",
                               "annotator": f"rater{i % 3}", "score": (i % 10) / 10} for i in range(rows)],
                    collection=tag, base_dir=images)
    cache = data.parent / f"{tag}-gradio-cache"
    os.environ["GRADIO_TEMP_DIR"] = str(cache)
    try:
        server = Server(data)
    finally:
        del os.environ["GRADIO_TEMP_DIR"]
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=os.environ.get("CAPLENS_CHROMIUM", "/usr/bin/chromium"))
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(120_000)
            page.goto(server.url)
            page.get_by_role("tab", name="Annotate").click()
            page.locator("#login-name textarea").fill("rita")
            page.locator("#login-password input, #login-password textarea").first.fill(PASSWORD)
            page.locator("#login-button").click()
            page.wait_for_function("() => document.querySelector('#login-status textarea')?.value"
                                   ".startsWith('Logged in')")
            page.get_by_role("tab", name="Data").click()
            page.get_by_role("tab", name="Export").click()
            box = page.locator("#data-export-format input")
            box.click()
            box.fill("hf")
            page.get_by_role("option", name="hf", exact=True).click()
            statuses, link = [], "#data-export-file a[href]"
            try:
                for click in range(clicks):  # each export is handed out as a new file: its link changes
                    before = page.locator(link).first.get_attribute("href") if page.locator(link).count() else ""
                    page.locator("#data-export-button").click()
                    page.wait_for_function("([link, before]) => { const a = document.querySelector(link); "
                                           "return a && a.getAttribute('href') !== before; }", arg=[link, before])
                    statuses.append(page.locator("#data-status textarea").input_value())
            except Exception:
                page.screenshot(path=str(data.parent / "export-failure.png"), full_page=True)
                raise
            status = " / ".join(statuses)
            browser.close()
        during = _bytes_under(cache)
    finally:
        server.stop(signal.SIGTERM)
    return {"clicks": clicks, "rows": rows, "status": status, "during_mb": during / 2**20,
            "after_mb": _bytes_under(cache) / 2**20, "exit_code": server.proc.returncode}


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

    from annotation.transfer.archives import extract_zip
    from annotation.people.auth_sessions import TooManyAttempts, log_in, log_out, session_account
    from annotation.database import database_session
    from annotation.image_store import inspect_image
    from db.models import AuthSession, User, utcnow
    from scoring.csv_safe import read_csv_frame, write_csv

    work = Path(tempfile.mkdtemp(prefix="bad-", dir=data.parent))
    results = []
    good = _png((1, 2, 3))
    results.append(("broken image (PNG cut in half)", _outcome(lambda: inspect_image(good[: len(good) // 2], "cut.png"))))
    results.append(("oversized pixels (PNG header 30000 x 30000, 0.1 KB)",
                    _outcome(lambda: inspect_image(_huge_png_header(30000, 30000), "huge.png"))))

    def html_caption():
        from annotation.people.acting import acting
        from annotation.transfer.importers import import_rows

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
        from annotation.people.accounts import create_user

        with database_session() as session:
            for name in ("replay0", "replay1"):
                create_user(session, name, "annotator", PASSWORD)
        login = log_in("replay0", PASSWORD, "198.51.100.7")
        log_out(login.token)
        first = _outcome(lambda: session_account(login.token).name)
        other = log_in("replay1", PASSWORD, "198.51.100.7")
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


def _latency_row(label: str, values: list[float]) -> tuple[str, str]:
    return (label, f"{_p95(values):.2f} s (max {max(values):.2f} s, {len(values)} calls)" if values else "no calls")


def _crowd_latency_rows(crowd: dict, calm: dict) -> list[tuple[str, str]]:
    """p95 of each call during the import and without one, as table rows."""
    return [*(_latency_row(f"p95 of {op} over HTTP during the import ({crowd['think_s']:g} s think)",
                           crowd["latencies"][op]) for op in ("login", "next_item", "rate")),
            *(_latency_row(f"p95 of {op} over HTTP without an import ({calm['think_s']:g} s think, "
                           f"{calm['measured_s']:.0f} s)", calm["latencies"][op]) for op in ("login", "next_item", "rate"))]


def _export_clicks_row(left: dict) -> tuple[str, str]:
    return (f"disk left in Gradio's cache by {left['clicks']} `hf` export clicks ({left['rows']:,} ratings each, "
            f"Chromium) after a SIGTERM stop",
            f"{left['after_mb']:.2f} MB (during: {left['during_mb']:.2f} MB; exit code {left['exit_code']}; "
            f"{left['status']})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the big import")
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--items", type=int, default=600, help="items of the crowd's queue (k = 3)")
    parser.add_argument("--think", type=float, default=THINK_S, help="seconds between an annotator's actions "
                        "during the import")
    parser.add_argument("--calm-think", type=float, default=0.5, help="the same without an import")
    parser.add_argument("--calm-seconds", type=float, default=120, help="how long the crowd works without an import")
    parser.add_argument("--anonymous-calls", type=int, default=300)
    parser.add_argument("--kill-rows", type=int, default=20_000)
    parser.add_argument("--export-rows", type=int, default=22_000)
    parser.add_argument("--click-rows", type=int, default=20_000, help="rows of the collection exported by clicks")
    parser.add_argument("--only-export-clicks", action="store_true",
                        help="only the disk left by 3 hf export clicks after a SIGTERM stop")
    parser.add_argument("--only-crowd", action="store_true",
                        help="only the crowd's latencies, during the import and without one")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="caplens-bench-reliability-"))
    data = work / "data"
    os.environ.update(_env(data))
    if not args.only_crowd:
        clicks = _export_clicks_row(exports_left_after_stop(data, args.click_rows))
        if args.only_export_clicks:
            print(f"| {clicks[0]} | {clicks[1]} |")
            return 0
    began = time.perf_counter()
    crowd = crowd_over_http(data, args.annotators, args.items, args.rows, args.think)
    print(f"crowd during the import done in {time.perf_counter() - began:.0f}s", file=sys.stderr, flush=True)
    calm = crowd_over_http(data, args.annotators, args.items, 0, args.calm_think, args.calm_seconds)
    print("crowd without an import done", file=sys.stderr, flush=True)
    latency_rows = _crowd_latency_rows(crowd, calm)
    if args.only_crowd:
        for name, outcome in latency_rows:
            print(f"| {name} | {outcome} |")
        print(f"| errors seen by the crowd | {len(crowd['errors'] + calm['errors'])} |")
        print(f"| the import | {'done' if crowd['import_ok'] else 'FAILED'}: {crowd['imported']} |")
        print(f"| items at exactly k={K} after the import's crowd | {crowd['exactly_k']} of {crowd['items']} "
              f"(over k: {crowd['over_k']}) |")
        return 0
    anonymous = anonymous_costs(data, args.anonymous_calls)
    print("anonymous costs done", file=sys.stderr, flush=True)
    killed = killed_import(data, args.kill_rows)
    print("killed import done", file=sys.stderr, flush=True)
    bad = bad_inputs(data)
    print("bad inputs done", file=sys.stderr, flush=True)
    export = big_export(args.export_rows)
    rows = [
        ("concurrent annotators (HTTP clients of `caplens serve`, each its own account and login)",
         str(crowd["annotators"])),
        (f"ratings stored of expected ({crowd['items']} items x k={K})",
         f"{crowd['stored']:,} of {crowd['items'] * K:,}"),
        (f"items at exactly k={K}", f"{crowd['exactly_k']} of {crowd['items']} (over k: {crowd['over_k']})"),
        (f"big import while they work ({crowd['rows']:,} rows, `caplens db import`)",
         (f"done in {crowd['measured_s']:.0f} s: {crowd['imported'].get('captions', 0):,} captions, "
          f"{crowd['imported'].get('ratings', 0):,} ratings") if crowd["import_ok"] else f"FAILED: {crowd['imported']}"),
    ]
    rows.extend(latency_rows)
    rows.append(("server RSS before / after the crowd (during the import; without)",
                 f"{crowd['rss_mb'][0]:.0f} / {crowd['rss_mb'][1]:.0f} MB; {calm['rss_mb'][0]:.0f} / "
                 f"{calm['rss_mb'][1]:.0f} MB"))
    errors = crowd["errors"] + calm["errors"]
    rows.append(("errors seen by the crowd", f"{len(errors)}" + (f": {sorted(set(errors))[:3]}" if errors else "")))
    rows.extend(anonymous)
    rows.append((f"partial rows after a killed import ({killed['rows']:,} rows, SIGKILL at "
                 f"'{killed['killed_at']}')", f"{killed['partial']} (gc: {killed['gc']})"))
    rows.append((f"peak RSS of the big export ({export['rows']:,} ratings, Hugging Face dataset)",
                 f"{export['peak_rss_mb']:,.0f} MB in {export['seconds']} s, exported {export['exported']}"
                 if not export["error"] else f"FAILED: {export['error']}"))
    rows.extend((f"bad input: {name}", outcome) for name, outcome in bad)
    rows.append(clicks)
    print("| check | outcome |")
    print("|---|---|")
    for name, outcome in rows:
        print(f"| {name} | {str(outcome).replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
