"""Alembic revisions (loaded by path; this file only makes the folder a package for the wheel)."""
