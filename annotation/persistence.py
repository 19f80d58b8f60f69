"""Where the ratings live and whether they survive a restart; backing the database and the
image store up to a Hugging Face dataset repository, and restoring them at the next start.

A Hugging Face Space's disk is wiped at every restart unless persistent storage is attached
(mounted at /data). The ratings survive when one of these holds, checked in this order:

1. `CAPLENS_DATABASE_URL` names a PostgreSQL database (the images still live in the data
   directory: put that on a persistent volume or back it up too);
2. the data directory is on a persistent volume (under `PERSISTENT_ROOT`, a Space's /data);
3. `CAPLENS_BACKUP_REPO` names a dataset repository (`owner/name`): every
   `CAPLENS_BACKUP_MINUTES` (default 10) `huggingface_hub.CommitScheduler` uploads a snapshot
   of the SQLite database and of the image store, and the next start on an empty data
   directory restores it (`restore_from_hub`). Needs an `HF_TOKEN` that may write the repo.

Without any, on a Space, `storage()` says that ratings would be lost, for the banner.
The snapshot is a folder (`snapshot` writes it, `restore` reads it), so the round trip is
tested against a local folder standing in for the repository.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from annotation.database import IMAGE_STORE_DIR_NAME, SQLITE_FILE_NAME, database_url, image_store_dir
from db.session import dispose_engines
from scoring.paths import data_dir

PERSISTENT_ROOT = Path("/data")
BACKUP_REPO_ENV = "CAPLENS_BACKUP_REPO"
BACKUP_MINUTES_ENV = "CAPLENS_BACKUP_MINUTES"
DEFAULT_BACKUP_MINUTES = 10
SNAPSHOT_DB = SQLITE_FILE_NAME
SNAPSHOT_IMAGES = IMAGE_STORE_DIR_NAME


@dataclass(frozen=True)
class Storage:
    """Where ratings live (`where`, in words without server paths), whether they survive a
    restart, and for the banner a `warning` when they would be lost."""

    where: str
    survives: bool
    warning: str = ""

    @property
    def line(self) -> str:
        return self.warning or f"Ratings are stored {self.where}; they survive a restart."


def _sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    return Path(parsed.database) if parsed.get_backend_name() == "sqlite" and parsed.database else None


def storage(environ=None) -> Storage:
    """Where the ratings live now and whether they survive a restart (see the module docstring)."""
    environ = os.environ if environ is None else environ
    url = environ.get("CAPLENS_DATABASE_URL") or database_url()
    if make_url(url).get_backend_name().startswith("postgresql"):
        return Storage("in PostgreSQL (CAPLENS_DATABASE_URL)", True)
    folder = data_dir().resolve()
    if folder.is_relative_to(PERSISTENT_ROOT):
        return Storage(f"in SQLite on the persistent volume {PERSISTENT_ROOT}", True)
    repo = environ.get(BACKUP_REPO_ENV)
    if repo:
        minutes = environ.get(BACKUP_MINUTES_ENV) or DEFAULT_BACKUP_MINUTES
        return Storage(f"in SQLite, backed up every {minutes} minutes to the dataset {repo} and restored at start",
                       True)
    if environ.get("SPACE_ID"):
        return Storage("in SQLite on this Space's disk", False,
                       "⚠️ Ratings on this Space are lost when it restarts: it has no persistent storage, no "
                       f"PostgreSQL (CAPLENS_DATABASE_URL) and no backup ({BACKUP_REPO_ENV}). Ask its owner to add one.")
    return Storage("in SQLite in the data directory (CAPLENS_DATA_DIR)", True)


def snapshot(dest: Path, url: str | None = None) -> dict:
    """Copy the SQLite database (with SQLite's online backup, consistent while the app writes)
    and the image store (files not yet there) into `dest`; returns counts."""
    source = _sqlite_file(url or database_url())
    if source is None:
        raise ValueError("only a SQLite database is snapshot; PostgreSQL has its own backups")
    dest.mkdir(parents=True, exist_ok=True)
    partial = dest / (SNAPSHOT_DB + ".partial")
    with sqlite3.connect(source) as live, sqlite3.connect(partial) as copy:
        live.backup(copy)
    copy.close()
    partial.replace(dest / SNAPSHOT_DB)
    images = dest / SNAPSHOT_IMAGES
    copied = 0
    for path in image_store_dir().rglob("*"):
        if path.is_file():
            target = images / path.relative_to(image_store_dir())
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                copied += 1
    return {"database": SNAPSHOT_DB, "images_copied": copied}


def restore(src: Path, url: str | None = None, overwrite: bool = False) -> bool:
    """Put a snapshot folder's database and images in place. Only into an empty data
    directory (no database file yet) unless `overwrite`; returns whether it restored."""
    target = _sqlite_file(url or database_url())
    if target is None or not (src / SNAPSHOT_DB).is_file():
        return False
    if target.exists() and not overwrite:
        return False
    dispose_engines()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src / SNAPSHOT_DB, target)
    images = src / SNAPSHOT_IMAGES
    if images.is_dir():
        shutil.copytree(images, image_store_dir(), dirs_exist_ok=True)
    return True


def restore_from_hub(repo_id: str) -> bool:
    """At start, on an empty data directory: the latest snapshot in the dataset `repo_id`."""
    from huggingface_hub import snapshot_download

    with tempfile.TemporaryDirectory() as folder:
        try:
            snapshot_download(repo_id=repo_id, repo_type="dataset", local_dir=folder)
        except Exception as exc:  # a missing repo (first start) or no network: start empty, say why
            raise OSError(f"could not read the backup dataset {repo_id}: {type(exc).__name__}") from exc
        return restore(Path(folder))


def start_backup(repo_id: str, minutes: float = DEFAULT_BACKUP_MINUTES, hf_api=None):
    """Back the database and images up to the dataset `repo_id` every `minutes`, with
    huggingface_hub's CommitScheduler (a snapshot is taken just before each upload); `hf_api`
    replaces its HfApi (tests give one that commits into a local folder). Returns the scheduler."""
    from huggingface_hub import CommitScheduler

    folder = Path(tempfile.mkdtemp(prefix="caplens-backup-"))

    class SnapshotScheduler(CommitScheduler):
        def push_to_hub(self):
            with self.lock:
                snapshot(folder)
            return super().push_to_hub()

    return SnapshotScheduler(repo_id=repo_id, repo_type="dataset", folder_path=folder, every=minutes,
                             private=True, squash_history=True, hf_api=hf_api)


def prepare_storage(report) -> Storage:
    """At start, before the database is opened: with `CAPLENS_BACKUP_REPO`, restore the latest
    backup into an empty data directory and start the scheduled backup. `report(line)` gets
    what happened, for the operator's console. Returns where the ratings live."""
    repo = os.environ.get(BACKUP_REPO_ENV)
    found = storage()
    if repo and not (make_url(database_url()).get_backend_name().startswith("postgresql")
                     or data_dir().resolve().is_relative_to(PERSISTENT_ROOT)):
        try:
            if restore_from_hub(repo):
                report(f"restored the ratings and images from the backup dataset {repo}.")
        except OSError as exc:
            report(f"{exc}; starting without a restore.")
        minutes = float(os.environ.get(BACKUP_MINUTES_ENV) or DEFAULT_BACKUP_MINUTES)
        start_backup(repo, minutes)
    report(found.line)
    return found
