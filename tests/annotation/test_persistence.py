"""Data that survives a restart (issue 24): what the app says about where ratings live, a
restart on the same data directory keeps every rating, and a backup through huggingface_hub's
CommitScheduler into a folder standing in for the dataset repository, restored into an empty
data directory, gives identical tables and images."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import create_engine, select, text

from annotation import persistence
from annotation.captions import add_caption, get_or_create_collection
from annotation.database import database_session, image_store_dir
from annotation.image_store import add_image
from annotation.studies.tasks import mark_critical, submit_rating
from db.models import Base, Rating
from db.session import dispose_engines

pytestmark = pytest.mark.parametrize("empty_db_url", ["sqlite"], indirect=True)


class FolderHub:
    """The part of HfApi CommitScheduler uses, committing into a local folder (the "repo")."""

    def __init__(self, root: Path):
        self.root, self.pool, self.commits = root, ThreadPoolExecutor(1), 0

    def create_repo(self, repo_id, **_):
        self.root.mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(repo_id=repo_id)

    def run_as_future(self, fn, *args, **kwargs):
        return self.pool.submit(fn, *args, **kwargs)

    def create_commit(self, repo_id, operations, **_):
        for operation in operations:
            target = self.root / operation.path_in_repo
            target.parent.mkdir(parents=True, exist_ok=True)
            source = operation.path_or_fileobj
            data = Path(source).read_bytes() if isinstance(source, (str, Path)) else source.read()
            target.write_bytes(data)
        self.commits += 1

    def super_squash_history(self, **_):
        pass


@pytest.fixture
def filled(db_url, accounts, make_png):
    with database_session() as s:
        rita, ann = s.merge(accounts["rita"]), s.merge(accounts["ann"])
        collection = get_or_create_collection(s, rita, "keep")
        for n in range(4):
            image = add_image(s, make_png((50 * n, 20, 20)), original_filename=f"k{n}.png")
            caption = add_caption(s, rita, image, f"a caption to keep {n}", collection=collection)
            submit_rating(s, ann, caption.id, n / 4, fluency=0.5 if n else None)
            submit_rating(s, s.merge(accounts["bea"]), caption.id, 0.9)
        mark_critical(s, ann, caption.id, ["caption"])


def _tables(url: str) -> dict:
    engine = create_engine(url)
    with engine.connect() as connection:
        tables = {name: sorted(map(tuple, connection.execute(text(f'SELECT * FROM "{name}"')).all()), key=repr)
                  for name in Base.metadata.tables}
    engine.dispose()
    return tables


def test_a_restart_on_the_same_data_directory_loses_no_rating(db_url, filled):
    with database_session(read_only=True) as s:
        before = [(r.caption_id, r.annotator_id, r.overall, r.fluency) for r in s.scalars(select(Rating))]
    dispose_engines()  # what a stopped process leaves: only the files
    with database_session(read_only=True) as s:
        after = [(r.caption_id, r.annotator_id, r.overall, r.fluency) for r in s.scalars(select(Rating))]
    assert len(before) == 8 and after == before


def test_backup_then_restore_gives_identical_tables_and_images(db_url, filled, tmp_path, monkeypatch):
    repo = tmp_path / "dataset-repo"
    hub = FolderHub(repo)
    scheduler = persistence.start_backup("someone/caplens-backup", minutes=60, hf_api=hub)
    scheduler.trigger().result()  # the scheduled upload, now
    scheduler.stop()
    assert hub.commits >= 1 and (repo / persistence.SNAPSHOT_DB).is_file()
    original_tables = _tables(db_url)
    original_images = {p.relative_to(image_store_dir()): p.read_bytes() for p in image_store_dir().rglob("*")
                       if p.is_file()}
    assert len(original_images) == 4

    fresh = tmp_path / "fresh-data"  # a restarted Space: an empty data directory
    fresh_url = f"sqlite:///{fresh / 'caplens.db'}"
    monkeypatch.setenv("CAPLENS_DATA_DIR", str(fresh))
    monkeypatch.setenv("CAPLENS_DATABASE_URL", fresh_url)
    dispose_engines()
    assert persistence.restore(repo) is True
    assert _tables(fresh_url) == original_tables
    restored = {p.relative_to(image_store_dir()): p.read_bytes() for p in image_store_dir().rglob("*") if p.is_file()}
    assert restored == original_images
    assert persistence.restore(repo) is False  # never over a database that is already there


def test_where_ratings_live_and_the_space_warning(db_url, monkeypatch):
    space = {"SPACE_ID": "someone/caplens"}
    warned = persistence.storage(space)
    assert not warned.survives and "lost when it restarts" in warned.line
    backed = persistence.storage({**space, persistence.BACKUP_REPO_ENV: "someone/backup"})
    assert backed.survives and "someone/backup" in backed.line and not backed.warning
    postgres = persistence.storage({**space, "CAPLENS_DATABASE_URL": "postgresql+psycopg://u@h/db"})
    assert postgres.survives and "PostgreSQL" in postgres.where
    local = persistence.storage({})  # not a Space: the data directory, named without its server path
    assert local.survives and "CAPLENS_DATA_DIR" in local.line and "/tmp" not in local.line
    monkeypatch.setattr(persistence, "PERSISTENT_ROOT", Path(db_url.removeprefix("sqlite:///")).parent.parent)
    assert persistence.storage(space).survives  # the data directory on the persistent volume


def test_start_restores_from_the_backup_and_schedules_the_next(db_url, monkeypatch, tmp_path):
    lines, started = [], []
    monkeypatch.setenv("SPACE_ID", "someone/caplens")
    assert not persistence.prepare_storage(lines.append).survives
    assert "lost when it restarts" in lines[-1]

    monkeypatch.setenv(persistence.BACKUP_REPO_ENV, "someone/backup")
    monkeypatch.setenv(persistence.BACKUP_MINUTES_ENV, "3")
    monkeypatch.setattr(persistence, "restore_from_hub", lambda repo: repo == "someone/backup")
    monkeypatch.setattr(persistence, "start_backup", lambda repo, minutes: started.append((repo, minutes)))
    lines.clear()
    assert persistence.prepare_storage(lines.append).survives
    assert started == [("someone/backup", 3.0)]
    assert lines == ["restored the ratings and images from the backup dataset someone/backup.",
                     "Ratings are stored in SQLite, backed up every 3 minutes to the dataset someone/backup and "
                     "restored at start; they survive a restart."]
