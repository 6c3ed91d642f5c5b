-- What an MCP prompts/list page needs when no worker has it in memory, in one round trip: the
-- prompts a label serves after a name (keyset, by name), each with its served version's title,
-- description, icons and arguments, as one JSON array of arrays (positional, so the worker parses
-- it without a key per field):
--   [name, version, title, description, icons, [[name, title, description, required, default,
--    enum, pattern, max_length], ...]]
-- And the number of prompts a label serves. Both run as registry_served_version_v2 does: SECURITY
-- INVOKER, dropping to the application role with the tenant set for the calling transaction, so
-- row-level security applies exactly as in tenant_tx.

CREATE FUNCTION registry_served_page_v1(p_tenant uuid, p_label text, p_after text, p_limit integer)
    RETURNS json
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN (
        SELECT coalesce(json_agg(json_build_array(
                   s.prompt_name, s.version, v.title, v.description, v.icons,
                   (SELECT json_agg(json_build_array(
                               a.name, a.title, a.description, a.required, a."default",
                               a.enum, a.pattern, a.max_length)
                           ORDER BY a.position)
                      FROM prompt_arguments a
                     WHERE a.tenant_id = p_tenant AND a.prompt_id = s.prompt_id
                       AND a.version = s.version))
                   ORDER BY s.prompt_name), '[]'::json)
          FROM (SELECT l.prompt_name, l.prompt_id, l.version
                  FROM labels l
                  JOIN prompts p ON p.tenant_id = l.tenant_id AND p.id = l.prompt_id
                 WHERE l.tenant_id = p_tenant AND l.label = p_label
                   AND l.prompt_name > coalesce(p_after, '')
                   AND p.archived_at IS NULL
                 ORDER BY l.prompt_name
                 LIMIT p_limit) s
          JOIN prompt_versions v
            ON v.tenant_id = p_tenant AND v.prompt_id = s.prompt_id AND v.version = s.version
    );
END
$$;

CREATE FUNCTION registry_served_count_v1(p_tenant uuid, p_label text)
    RETURNS bigint
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN (
        SELECT count(*)
          FROM labels l
          JOIN prompts p ON p.tenant_id = l.tenant_id AND p.id = l.prompt_id
         WHERE l.tenant_id = p_tenant AND l.label = p_label AND p.archived_at IS NULL
    );
END
$$;
