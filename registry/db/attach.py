"""A database at head for a short-lived process (a command, a benchmark script): the embedded server
of REGISTRY_DATA_DIR attached to (the running one of another process, else one owned meanwhile;
created when the directory holds none yet), or the external one; migrated to head on the way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from registry.config import Settings, load_settings
from registry.db import migrate as migrations
from registry.db.embedded import EmbeddedPostgres


@contextmanager
def attached_database(settings: Settings | None = None) -> Iterator[str]:
    """The URL of a database at head, released when the block ends."""
    settings = settings or load_settings()
    if settings.embedded:
        with EmbeddedPostgres(settings.data_dir).attach() as url:
            migrations.upgrade(url)
            yield url
        return
    external = settings.database_dsn()
    assert external is not None  # not embedded: the URL is set
    migrations.upgrade(external)
    yield external
