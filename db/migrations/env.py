"""Alembic environment: runs CapLens migrations against the configured database."""
from alembic import context

from db import config as caplens_config
from db.models import Base
from db.session import create_database_engine

config = context.config
url = config.get_main_option("sqlalchemy.url") or caplens_config.database_url()
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
            # render_as_batch: SQLite can only alter tables by copying them.
            context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
