"""The SQL functions whose statements are built from texts the registry shares with its other
statements: the migration's copy is the text the code builds, so that a change of a shared text
fails here until a new version of the function carries it."""

from __future__ import annotations

import re
from pathlib import Path

from registry.prompts import version_repository

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "sql"


def _normalised(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def test_the_version_write_function_is_the_statement_the_code_builds() -> None:
    source = (MIGRATIONS / "0026_write_version_v1.sql").read_text()
    found = re.search(
        r"CREATE FUNCTION registry_version_rows_v1\(.*?RETURN QUERY\n(.*?);\nEND\n\$\$;",
        source,
        re.DOTALL,
    )
    assert found is not None
    assert _normalised(found.group(1)) == _normalised(version_repository.version_rows_statement())
