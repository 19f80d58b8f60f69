"""Alembic environment: runs CapLens migrations against the database it is given.

`caplens db upgrade` passes the URL in the Alembic configuration; a developer running the
`alembic` command sets CAPLENS_DATABASE_URL (see db/alembic.ini).
"""
import os

from alembic import context

from db.models import Base
from db.session import create_database_engine

config = context.config
url = config.get_main_option("sqlalchemy.url") or os.environ.get("CAPLENS_DATABASE_URL")
if not url:
    raise SystemExit("no database: set CAPLENS_DATABASE_URL (e.g. sqlite:////tmp/x.db)")
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=target_metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_database_engine(url)
    try:
        with engine.connect() as connection:
            sqlite = connection.dialect.name == "sqlite"
            if sqlite:
                # render_as_batch: SQLite can only alter tables by copying them, and dropping the
                # old copy with foreign keys on cascades into every table that refers to it (a
                # downgrade emptied ratings and collection memberships). The pragma only takes
                # effect outside a transaction, so it goes to the driver before any begins.
                connection.connection.dbapi_connection.execute("PRAGMA foreign_keys = OFF")
            context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"the migration left {len(broken)} rows whose foreign keys "
                                           f"point nowhere (first in table {broken[0][0]})")
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
