"""CapLens storage: SQLAlchemy 2 models, Alembic migrations, engines and sessions. Imports
nothing of the other CapLens packages: URLs and engines come from the caller."""
