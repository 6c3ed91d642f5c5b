"""a version written before 0015 gets its stored list entry, filled in once, and its labels with it

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24 21:30:00
"""

from collections.abc import Sequence
from typing import Any

import orjson
from alembic import op
from sqlalchemy import text

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


# Labels pointing at a version that had no entry when they were written take it now.
_LABELS = text("""
UPDATE labels l SET list_entry = v.list_entry
  FROM prompt_versions v
 WHERE l.list_entry IS NULL AND v.list_entry IS NOT NULL
   AND v.tenant_id = l.tenant_id AND v.prompt_id = l.prompt_id AND v.version = l.version
""")


def upgrade() -> None:
    # As the schema's owner, which passes row-level security (BYPASSRLS, or a superuser): every
    # tenant's versions, a thousand at a time, each entry as registry.prompts.listing stores it.
    # Versions are immutable (immutable_v1, migrations/sql/0001_triggers_v1.sql); the entry is
    # derived from what the version says, so this one fill sets the trigger aside inside the
    # migration's transaction (writes of versions wait for it to commit) and puts it back.
    # Imported here, not at the top: Alembic loads every migration to learn the head, which each
    # `registry` command and each worker's first /readyz does, and this pulls in the prompt models.
    from registry.prompts.listing import served_prompt, stored_entry

    bind = op.get_bind()
    op.execute("ALTER TABLE prompt_versions DISABLE TRIGGER immutable_v1")
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
    op.execute("ALTER TABLE prompt_versions ENABLE TRIGGER immutable_v1")
    bind.execute(_LABELS)


def downgrade() -> None:
    pass  # the entries filled in stay: every schema since 0015 reads them as written with the version
