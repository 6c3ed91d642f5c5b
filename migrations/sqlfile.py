"""Running the readable SQL files of migrations/sql/ from a migration (read as package resources, so
an installed wheel finds them as well as a checkout)."""

from __future__ import annotations

from importlib.resources import files

from alembic import op


def sql_text(name: str) -> str:
    return (files("registry.migrations") / "sql" / name).read_text(encoding="utf-8")


def run_sql_file(name: str) -> None:
    """Statement by statement (the driver takes one at a time): a statement ends with `;` at the end
    of a line outside a $$-quoted body."""
    statement: list[str] = []
    in_body = False
    for line in sql_text(name).splitlines():
        statement.append(line)
        if line.count("$$") % 2 == 1:
            in_body = not in_body
        if not in_body and line.rstrip().endswith(";"):
            op.get_bind().exec_driver_sql("\n".join(statement))
            statement = []
    assert not "".join(statement).strip(" \n"), f"{name}: trailing text without a final `;`"
