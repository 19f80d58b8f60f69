"""16 annotator processes x 100 ratings at once: nothing lost, nothing duplicated."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import func, select

from annotation import workflows as wf
from db.images import add_image
from db.models import Rating
from db.session import session_scope
from db.users import create_user

REPO = Path(__file__).resolve().parents[2]
WORKERS, PER_WORKER, ITEMS, K = 16, 100, 200, 16


def test_sixteen_writers_lose_and_duplicate_nothing(engine, db_url, accounts, make_png, tmp_path):
    with session_scope(engine) as s:
        col = wf.get_or_create_collection(s, accounts["rita"], "busy")
        images = [add_image(s, make_png((i, 0, 0)), f"{i}.png") for i in range(20)]
        for i in range(ITEMS):
            wf.add_caption(s, accounts["rita"], images[i % 20], f"caption number {i}", collection=col)
        for w in range(WORKERS):
            create_user(s, f"worker{w}", "annotator")
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, str(REPO / "tests/db/rating_worker.py"), db_url, f"worker{w}",
                               "busy", str(PER_WORKER), str(K), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
             for w in range(WORKERS)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.ready.*"))) < WORKERS:  # all started: they begin together
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a writer failed to start"
        time.sleep(0.05)
    started = time.perf_counter()
    go.touch()
    outputs = [p.communicate(timeout=240) for p in procs]
    wall = time.perf_counter() - started
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
    results = [json.loads(out) for out, _err in outputs]
    reported = {(f"worker{w}", rating_id, caption_id)
                for w, result in enumerate(results) for rating_id, caption_id in result["ratings"]}
    assert len(reported) == WORKERS * PER_WORKER
    for result in results:  # no annotator got the same item twice
        captions = [caption_id for _r, caption_id in result["ratings"]]
        assert len(captions) == len(set(captions)) == PER_WORKER
    with session_scope(engine, read_only=True) as s:
        stored = {(name, rating_id, caption_id) for name, rating_id, caption_id in s.execute(
            select(wf.User.name, Rating.id, Rating.caption_id).join(wf.User, wf.User.id == Rating.annotator_id)
            .where(wf.User.name.like("worker%")))}
        per_item = s.execute(select(func.count(Rating.id)).group_by(Rating.caption_id)).scalars().all()
    assert stored == reported  # every reported rating is stored, nothing more
    assert max(per_item) <= K
    slowest = max(r["seconds"] for r in results)
    print(f"\nconcurrency[{engine.dialect.name}]: {WORKERS} writers x {PER_WORKER} ratings = {len(stored)} stored, "
          f"0 lost, 0 duplicated; wall {wall:.1f}s, slowest writer {slowest:.1f}s, "
          f"{len(stored) / slowest:.0f} ratings/s, ratings per item {min(per_item)}-{max(per_item)}")
