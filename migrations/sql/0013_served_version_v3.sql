-- What an MCP prompts/get needs on a cache miss, in one round trip, as registry_served_version_v2
-- returns it. v3 reads the version, its arguments and messages first and walks the partial locks only
-- when the version has any: most versions have none, and the walk (a recursive query and two
-- aggregates) cost about a third of the function even when it found nothing.
-- SECURITY INVOKER: it drops to the application role and sets the tenant for the calling transaction
-- (an implicit one when called alone), so row-level security applies exactly as in tenant_tx.

CREATE FUNCTION registry_served_version_v3(p_tenant uuid, p_name text, p_label text, p_version integer)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_prompt uuid;
    v_latest integer;
    v_archived timestamptz;
    v_number integer;
    v_found jsonb;
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    SELECT p.id, p.latest_version, p.archived_at INTO v_prompt, v_latest, v_archived
      FROM prompts p WHERE p.tenant_id = p_tenant AND p.name = p_name;
    IF v_prompt IS NULL OR v_archived IS NOT NULL THEN
        RETURN jsonb_build_object('missing', 'prompt');
    END IF;
    IF p_version IS NOT NULL THEN
        IF p_version < 1 OR p_version > v_latest THEN
            RETURN jsonb_build_object('missing', 'version');
        END IF;
        v_number := p_version;
    ELSE
        SELECT l.version INTO v_number FROM labels l
         WHERE l.tenant_id = p_tenant AND l.prompt_id = v_prompt AND l.label = p_label;
        IF v_number IS NULL THEN
            RETURN jsonb_build_object('missing', 'label');
        END IF;
    END IF;
    SELECT jsonb_build_object(
        'prompt', v_prompt,
        'version', v_number,
        'description', v.description,
        'config', v.config,
        'arguments', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'name', a.name, 'required', a.required, 'default', a."default",
                       'enum', a.enum, 'pattern', a.pattern, 'max_length', a.max_length)
                   ORDER BY a.position)
              FROM prompt_arguments a
             WHERE a.tenant_id = p_tenant AND a.prompt_id = v_prompt AND a.version = v_number
        ), '[]'::jsonb),
        'messages', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'role', m.role, 'content', m.content,
                       'blob', encode(m.blob_sha256, 'hex'))
                   ORDER BY m.position)
              FROM prompt_messages m
             WHERE m.tenant_id = p_tenant AND m.prompt_id = v_prompt AND m.version = v_number
        ), '[]'::jsonb),
        'locks', '[]'::jsonb,
        'sources', '[]'::jsonb)
      INTO v_found
      FROM prompt_versions v
     WHERE v.tenant_id = p_tenant AND v.prompt_id = v_prompt AND v.version = v_number;
    IF NOT EXISTS (SELECT 1 FROM prompt_partials l
                    WHERE l.tenant_id = p_tenant AND l.prompt_id = v_prompt
                      AND l.version = v_number) THEN
        RETURN v_found;  -- no partials: the common case skips the walk below
    END IF;
    RETURN v_found || (
        WITH RECURSIVE locks AS (
            SELECT l.prompt_id, l.version, l.ref, l.child_prompt_id, l.child_version, 1 AS depth
              FROM prompt_partials l
             WHERE l.tenant_id = p_tenant AND l.prompt_id = v_prompt AND l.version = v_number
            UNION
            SELECT l.prompt_id, l.version, l.ref, l.child_prompt_id, l.child_version, k.depth + 1
              FROM locks k
              JOIN prompt_partials l
                ON l.tenant_id = p_tenant AND l.prompt_id = k.child_prompt_id
               AND l.version = k.child_version
             WHERE k.depth < 16
        )
        SELECT jsonb_build_object(
            'locks', coalesce((
                SELECT jsonb_agg(DISTINCT jsonb_build_object(
                           'prompt', k.prompt_id, 'version', k.version, 'ref', k.ref,
                           'child_prompt', k.child_prompt_id, 'child_version', k.child_version))
                  FROM locks k
            ), '[]'::jsonb),
            'sources', coalesce((
                SELECT jsonb_agg(jsonb_build_object(
                           'prompt', m.prompt_id, 'version', m.version, 'text', m.content->>'text'))
                  FROM (SELECT DISTINCT child_prompt_id, child_version FROM locks) c
                  JOIN prompt_messages m
                    ON m.tenant_id = p_tenant AND m.prompt_id = c.child_prompt_id
                   AND m.version = c.child_version AND m.position = 0
            ), '[]'::jsonb))
    );
END
$$;
