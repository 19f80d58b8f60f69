"""Kill an importing process with SIGKILL midway: the database shows none of that import.

The import commits its staging in batches; the kill comes after at least one batch was
committed, so staging rows exist, yet no table a user reads has any row of the import, and
`caplens db gc` deletes the abandoned staging and its image files."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import func, select

from annotation.image_store import orphaned_files
from db.models import STAGING_TABLES, Base
from db.session import dispose_engines, get_engine, session_scope

REPO = Path(__file__).resolve().parents[2]
ROWS, IMAGES, KILL_AFTER = 1500, 40, 500


def _counts(engine, staging: bool = False) -> dict:
    """Rows per visible table (or, with `staging`, per staging table)."""
    with session_scope(engine, read_only=True) as s:
        return {name: s.execute(select(func.count()).select_from(table)).scalar()
                for name, table in Base.metadata.tables.items() if (name in STAGING_TABLES) == staging}


def test_killed_import_leaves_nothing(engine, db_url, data_dir, tmp_path, make_png):
    source = tmp_path / "big"
    source.mkdir()
    for i in range(IMAGES):
        (source / f"{i}.png").write_bytes(make_png((i * 4, 100, 50), (16, 16)))
    with (source / "big.jsonl").open("w") as handle:
        for i in range(ROWS):
            handle.write(json.dumps({"image": f"{i % IMAGES}.png", "caption": f"caption {i} of a square",
                                     "caption_id": f"c{i}", "references": [f"reference {i % IMAGES}"],
                                     "annotator": f"rater{i % 7}", "score": (i % 10) / 10}) + "\n")
    before = _counts(engine)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CAPLENS_DATABASE_URL": db_url,
           "CAPLENS_DATA_DIR": str(data_dir)}
    command = [sys.executable, "-m", "app.cli", "db", "import", str(source / "big.jsonl"), "--collection", "big"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=REPO)
    seen = []
    for line in proc.stderr:
        seen.append(line.strip())
        stage, _, progress = line.partition(" ")
        if stage == "writing" and int(progress.split("/")[0]) >= KILL_AFTER:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    kill_seconds = time.perf_counter() - started
    killed_at = seen[-1]
    assert proc.returncode == -signal.SIGKILL, seen  # killed, not finished
    dispose_engines()
    engine = get_engine(db_url)
    assert _counts(engine) == before  # none of the import: no rows in any table a user reads
    staged = _counts(engine, staging=True)
    assert staged["import_stagings"] == 1 and staged["staged_captions"] >= KILL_AFTER  # batches were committed
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    # A fresh staging is kept (its import may still be running); an idle one goes, and with it
    # the image files the killed import had put in the store.
    gc_command = [sys.executable, "-m", "app.cli", "db", "gc"]
    gc = subprocess.run(gc_command, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert gc.returncode == 0 and "deleted 0 unreferenced image files; 0 abandoned" in gc.stdout, gc.stderr
    gc = subprocess.run(gc_command + ["--staging-idle-minutes", "0"], capture_output=True, text=True, env=env,
                        cwd=REPO, timeout=120)
    orphans = IMAGES
    assert gc.returncode == 0 and f"deleted {orphans} unreferenced image files; 1 abandoned" in gc.stdout, gc.stdout
    assert set(_counts(engine, staging=True).values()) == {0}
    with session_scope(engine, read_only=True) as s:
        assert orphaned_files(s) == []
    # The database is healthy: the same import now runs to the end.
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    full_seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["counts"]["captions"] == ROWS and report["counts"]["ratings"] == ROWS
    after = _counts(engine)
    assert after["captions"] == ROWS + IMAGES and after["ratings"] == ROWS and after["imports"] == 1
    print(f"\ninterrupted import[{engine.dialect.name}]: SIGKILL at '{killed_at}' after {kill_seconds:.1f}s; "
          f"rows left by the killed import: 0; {orphans} orphaned image files removed by gc; "
          f"full re-import of {ROWS} captions + {ROWS} ratings took {full_seconds:.1f}s")


def test_gc_during_an_import_keeps_the_files_the_import_is_about_to_name(engine, accounts, tmp_path, make_png,
                                                                          monkeypatch):
    """An import writes its image files before any staging row names them; `caplens db gc` run
    in between had deleted them, and the import then published images without files."""
    import annotation.transfer.importers as importers
    from annotation.image_store import image_path
    from db.models import Image

    source = tmp_path / "src"
    source.mkdir()
    for i in range(3):
        (source / f"img{i}.png").write_bytes(make_png((i * 60, 10, 10)))
    path = source / "in.jsonl"
    path.write_text("\n".join(json.dumps({"image": f"img{i}.png", "caption": f"caption {i}"}) for i in range(3)))
    deleted, stage = [], importers.stage

    def stage_after_gc(*args, **kwargs):  # what `caplens db gc` does, at the worst moment
        with session_scope(engine) as s:
            for orphan in orphaned_files(s):
                orphan.unlink()
                deleted.append(orphan.name)
        return stage(*args, **kwargs)

    monkeypatch.setattr(importers, "stage", stage_after_gc)
    with session_scope(engine, read_only=True) as s:
        report = importers.import_file(s, accounts["rita"], path, collection="gc", commit_batches=True)
    assert report.counts["images_new"] == 3 and deleted == []
    with session_scope(engine, read_only=True) as s:
        images = list(s.scalars(select(Image)))
        assert len(images) == 3 and all(image_path(image).is_file() for image in images)
