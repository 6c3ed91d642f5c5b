"""Fixtures of the database tests: a real PgBouncer and a real streaming replica of the test
server."""

from tests.pgbouncer import pgbouncer
from tests.replica import replica

__all__ = ["pgbouncer", "replica"]
