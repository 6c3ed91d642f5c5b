"""The registry's Alembic migrations, shipped inside the package as ``registry.migrations``."""
