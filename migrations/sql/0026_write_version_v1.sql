-- A prompt's new version, written in one statement (registry.prompts.version_repository's
-- version_rows_statement, whose copy this is: tests/db/test_sql_functions.py holds the two equal),
-- for the two ways a version is written:
--   registry_version_rows_v1, in the caller's transaction, the prompt locked by it, the tenant entered;
--   registry_write_version_v1, the ordinary write of the REST API's plain route as one call on the
--   hot path's pool, its own transaction (registry.prompts.at_once).
-- SECURITY INVOKER, both: row-level security applies to every row they read and write.

CREATE FUNCTION registry_version_rows_v1(
        uuid, uuid, integer, bytea, text, text, text, text, text, text, text, text, text, text,
        text, text, text, text, text[])
    RETURNS TABLE (written integer, created_at timestamptz, prompt_updated_at timestamptz,
                   prompt_name text, label text, version integer, updated_by text,
                   updated_at timestamptz, before integer, labels text[], versions integer[],
                   contracts jsonb)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
WITH same AS (
    SELECT 1 FROM prompt_versions
     WHERE tenant_id = $1 AND prompt_id = $2 AND version = $3 AND content_hash = $4
), bumped AS (
    UPDATE prompts SET latest_version = latest_version + 1, updated_at = now()
     WHERE tenant_id = $1 AND id = $2 AND NOT EXISTS (SELECT 1 FROM same)
    RETURNING latest_version, updated_at
), inserted AS (
    INSERT INTO prompt_versions
           (tenant_id, prompt_id, version, title, description, icons, config, commit_message,
            author, content_hash, list_entry)
    SELECT $1, $2, bumped.latest_version, $5, $6, CAST($7::text AS jsonb),
           CAST($8::text AS jsonb), $9, $10, $4, $11
      FROM bumped
    RETURNING version, created_at
), arguments AS (
    INSERT INTO prompt_arguments
           (tenant_id, prompt_id, version, position, name, title, description, required, "default",
            enum, pattern, max_length, suggestions)
    SELECT $1, $2, inserted.version, a.position, a.name, a.title, a.description,
           coalesce(a.required, false), a."default", a.enum, a.pattern, a.max_length, a.suggestions
      FROM inserted, jsonb_populate_recordset(NULL::prompt_arguments, CAST($12::text AS jsonb)) a
), messages AS (
    INSERT INTO prompt_messages (tenant_id, prompt_id, version, position, role, content, blob_sha256)
    SELECT $1, $2, inserted.version, m.position, m.role, m.content, m.blob_sha256
      FROM inserted, jsonb_populate_recordset(NULL::prompt_messages, CAST($13::text AS jsonb)) m
), partials AS (
    INSERT INTO prompt_partials
           (tenant_id, prompt_id, version, ref, child_name, child_prompt_id, child_version)
    SELECT $1, $2, inserted.version, l.ref, l.child_name, l.child_prompt_id, l.child_version
      FROM inserted, jsonb_populate_recordset(NULL::prompt_partials, CAST($14::text AS jsonb)) l
), before AS (
    SELECT version FROM labels WHERE tenant_id = $1 AND prompt_id = $2 AND label = $16
), moved AS (
    INSERT INTO labels AS l (tenant_id, prompt_id, label, prompt_name, version, updated_by)
    SELECT $1, $2, $16, $15, inserted.version, $10 FROM inserted
    ON CONFLICT (tenant_id, prompt_id, label) DO UPDATE
       SET version = EXCLUDED.version, updated_by = EXCLUDED.updated_by, updated_at = now()
     WHERE l.version <> EXCLUDED.version
    RETURNING l.prompt_name, l.label, l.version, l.updated_by, l.updated_at
), history AS (
    INSERT INTO label_history (tenant_id, prompt_id, label, from_version, to_version, actor)
    SELECT $1, $2, $16, (SELECT version FROM before), moved.version, $10 FROM moved
),
journal_audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, target, before, after)
    SELECT (a.row->>'tenant_id')::uuid, a.row->>'actor', a.row->>'action', a.row->>'target',
           nullif(a.row->'before', 'null'), nullif(a.row->'after', 'null')
      FROM inserted, jsonb_array_elements(CAST((CAST($17::text AS jsonb) || jsonb_build_array(jsonb_build_object(
    'tenant_id', $1, 'actor', $10, 'action', 'version.create',
    'target', 'prompt:' || $15 || '@' || inserted.version,
    'before', CASE WHEN $3 > 0 THEN jsonb_build_object('version', $3) END,
    'after', jsonb_build_object('version', inserted.version, 'content_hash', encode($4, 'hex'),
                                'commit_message', $9))))::text AS jsonb)) WITH ORDINALITY AS a(row, n)
     ORDER BY a.n
), journal_changes AS (
    INSERT INTO change_pending (tenant_id, kind, prompt_id, label, detail)
    SELECT (c.row->>'tenant_id')::uuid, c.row->>'kind', (c.row->>'prompt_id')::uuid, c.row->>'label',
           nullif(c.row->'detail', 'null')
      FROM inserted, jsonb_array_elements(CAST((CAST($18::text AS jsonb) || jsonb_build_array(jsonb_build_object(
    'tenant_id', $1, 'kind', 'label.move', 'prompt_id', $2, 'label', $16)))::text AS jsonb)) WITH ORDINALITY AS c(row, n)
     ORDER BY c.n
)
SELECT inserted.version AS written, inserted.created_at, bumped.updated_at AS prompt_updated_at,
       moved.prompt_name, moved.label, moved.version, moved.updated_by, moved.updated_at,
       (SELECT version FROM before) AS before, held.labels, held.versions, contracted.contracts
  FROM inserted CROSS JOIN bumped LEFT JOIN moved ON true CROSS JOIN LATERAL (SELECT array_agg(label ORDER BY label) AS labels,
                       array_agg(version ORDER BY label) AS versions
                  FROM labels WHERE tenant_id = $1 AND prompt_id = $2) AS held
       CROSS JOIN LATERAL (
    SELECT jsonb_object_agg(served.version, served.arguments) AS contracts
      FROM (SELECT l.version,
                   coalesce(jsonb_agg(jsonb_build_object('name', a."name", 'title', a."title", 'description', a."description", 'required', a."required", 'default', a."default", 'enum', a."enum", 'pattern', a."pattern", 'max_length', a."max_length") ORDER BY a.position)
                     FILTER (WHERE a.name IS NOT NULL), '[]') AS arguments
              FROM labels l
              LEFT JOIN prompt_arguments a
                ON a.tenant_id = $1 AND a.prompt_id = $2 AND a.version = l.version
             WHERE l.tenant_id = $1 AND l.prompt_id = $2 AND l.label = ANY($19::text[])
             GROUP BY l.version) AS served) AS contracted;
END
$$;

-- The ordinary version write in one call: the caller, settled by the worker beforehand (the
-- operator, or an API key it checked a moment ago: p_key and the SHA-256 of its secret), is checked
-- again here, where a revocation or a role change committed since cannot be missed; the prompt is
-- locked, and the version written as registry_version_rows_v1 writes it, with no label besides
-- latest and no partials. No row comes back, and nothing is written, when anything is not the
-- ordinary case: the key is no longer valid for p_roles, the tenant takes no API keys now, the
-- prompt does not exist or has test cases (the answer shows them run), If-Match (p_if_match) names
-- another version, or the latest version has this content. The worker then writes through its
-- general path, which decides and words every one of those answers.
CREATE FUNCTION registry_write_version_v1(
        p_tenant uuid, p_operator boolean, p_key uuid, p_key_hash bytea, p_roles text[],
        p_name text, p_if_match integer, p_hash bytea, p_title text, p_description text,
        p_icons text, p_config text, p_commit_message text, p_author text, p_list_entry text,
        p_arguments text, p_messages text, p_latest text)
    RETURNS TABLE (written integer, created_at timestamptz, prompt_updated_at timestamptz,
                   prompt_name text, label text, version integer, updated_by text,
                   updated_at timestamptz, before integer, labels text[], versions integer[],
                   contracts jsonb, prompt_id uuid, tags text[], as_tool boolean,
                   archived_at timestamptz, prompt_created_at timestamptz)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    locked record;
BEGIN
    -- As a tenant's transaction does (registry.db.repository._GENERIC_PLANS): planned once per
    -- connection, not for each call's values.
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true),
            set_config('plan_cache_mode', 'force_generic_plan', true);
    IF p_key IS NULL THEN
        IF NOT p_operator THEN
            RETURN;
        END IF;
    ELSIF NOT EXISTS (
        SELECT 1 FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
         WHERE k.tenant_id = p_tenant AND k.id = p_key AND k.secret_hash = p_key_hash
           AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
           AND k.role = ANY (p_roles) AND t.api_keys) THEN
        RETURN;
    END IF;
    SELECT p.id, p.latest_version, p.tags, p.as_tool, p.archived_at, p.created_at, p.tests
      INTO locked
      FROM prompts p
     WHERE p.tenant_id = p_tenant AND p.name = p_name
       FOR UPDATE;
    IF NOT FOUND OR coalesce(locked.tests, '[]'::jsonb) <> '[]'::jsonb
       OR (p_if_match IS NOT NULL AND p_if_match <> locked.latest_version) THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT w.*, locked.id, locked.tags, locked.as_tool, locked.archived_at, locked.created_at
          FROM registry_version_rows_v1(
                   p_tenant, locked.id, locked.latest_version, p_hash, p_title, p_description,
                   p_icons, p_config, p_commit_message, p_author, p_list_entry, p_arguments,
                   p_messages, '[]', p_name, p_latest, '[]', '[]', '{}') AS w;
END
$$;
