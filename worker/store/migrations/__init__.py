"""Alembic migrations of the memory store (run through :mod:`worker.store.schema`)."""
