"""CapLens storage: SQLAlchemy 2 models, Alembic migrations, sessions, data directory."""
