"""Fixtures of the database tests: a real PgBouncer in front of the test server."""

from tests.pgbouncer import pgbouncer

__all__ = ["pgbouncer"]
