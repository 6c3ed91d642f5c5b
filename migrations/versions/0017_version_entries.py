"""a version written before 0015 gets its stored list entry, filled in once

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24 21:30:00
"""

from collections.abc import Sequence
from typing import Any

import orjson
from alembic import op
from sqlalchemy import text

from registry.migrations.sqlfile import run_sql_file
from registry.prompts.listing import served_prompt, stored_entry

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Versions without an entry, by primary key after a given one, with what their entry is made of
# (as registry_served_page_v1 returns a served version, after its name).
_UNFILLED = text("""
SELECT v.tenant_id, v.prompt_id, v.version, p.name,
       json_build_array(
           v.version, v.title, v.description, v.icons,
           (SELECT json_agg(json_build_array(
                       a.name, a.title, a.description, a.required, a."default",
                       a.enum, a.pattern, a.max_length)
                   ORDER BY a.position)
              FROM prompt_arguments a
             WHERE a.tenant_id = v.tenant_id AND a.prompt_id = v.prompt_id
               AND a.version = v.version))::text AS served
  FROM prompt_versions v
  JOIN prompts p ON p.tenant_id = v.tenant_id AND p.id = v.prompt_id
 WHERE v.list_entry IS NULL
   AND (v.tenant_id, v.prompt_id, v.version) > (:tenant, :prompt, :version)
 ORDER BY v.tenant_id, v.prompt_id, v.version
 LIMIT 1000
""")

_FILL = text("""
UPDATE prompt_versions SET list_entry = :entry
 WHERE tenant_id = :tenant AND prompt_id = :prompt AND version = :version
""")

_NOTHING = "00000000-0000-0000-0000-000000000000"


def upgrade() -> None:
    run_sql_file("0017_version_entries_v1.sql")
    # As the schema's owner, which passes row-level security (BYPASSRLS, or a superuser): every
    # tenant's versions, a thousand at a time, each entry as registry.prompts.listing stores it.
    bind = op.get_bind()
    after: dict[str, Any] = {"tenant": _NOTHING, "prompt": _NOTHING, "version": 0}
    while rows := bind.execute(_UNFILLED, after).all():
        bind.execute(
            _FILL,
            [
                {
                    "tenant": tenant,
                    "prompt": prompt,
                    "version": version,
                    "entry": stored_entry(served_prompt(name, *orjson.loads(served))),
                }
                for tenant, prompt, version, name, served in rows
            ],
        )
        tenant, prompt, version = rows[-1][:3]
        after = {"tenant": tenant, "prompt": prompt, "version": version}


def downgrade() -> None:
    # The entries filled in stay: 0015's schema reads them as entries written with their versions.
    op.execute("DROP TRIGGER entry_filled_v1 ON prompt_versions")
    op.execute("DROP FUNCTION registry_version_entry_filled_v1()")
    op.execute("DROP TRIGGER immutable_v2 ON prompt_versions")
    op.execute(
        "CREATE TRIGGER immutable_v1 BEFORE UPDATE OR DELETE ON prompt_versions"
        " FOR EACH ROW EXECUTE FUNCTION registry_forbid_change_v1()"
    )
    op.execute("DROP FUNCTION registry_forbid_version_change_v1()")
