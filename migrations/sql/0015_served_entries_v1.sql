-- Each version keeps its prompts/list entry as the newest revisions carry it (registry.prompts.listing
-- computes it when the version is written; versions never change, so neither does the entry). An
-- uncached page of those revisions is then the label index scan, the prompt's archived check and a
-- version lookup per prompt, each row's entry passed through as text. A version written before this
-- schema has none: its row comes back with its fields ("served", as registry_served_page_v1 has them
-- after the name) and the worker shapes it. Runs as registry_served_page_v1 does: SECURITY INVOKER,
-- dropping to the application role with the tenant set for the calling transaction, so row-level
-- security applies exactly as in tenant_tx.
--
-- Planned for each call's values (plan_cache_mode): after five calls plpgsql would switch to a
-- generic plan, which under row-level security costs about twice as much for a page of 1,000
-- (docs/benchmarks.md, third pass); planning a page costs well under a millisecond. The same for the page
-- and count functions of 0012. Not for registry_served_version_v3: one prompt's read is short enough
-- that planning it each time costs more than it saves.

ALTER TABLE prompt_versions ADD COLUMN list_entry text;

CREATE FUNCTION registry_served_entries_v1(p_tenant uuid, p_label text, p_after text, p_limit integer)
    RETURNS TABLE (name text, entry text, served json)
    LANGUAGE plpgsql
    SET plan_cache_mode = force_custom_plan
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN QUERY
        SELECT s.prompt_name, v.list_entry,
               CASE WHEN v.list_entry IS NULL THEN json_build_array(
                   s.version, v.title, v.description, v.icons,
                   (SELECT json_agg(json_build_array(
                               a.name, a.title, a.description, a.required, a."default",
                               a.enum, a.pattern, a.max_length)
                           ORDER BY a.position)
                      FROM prompt_arguments a
                     WHERE a.tenant_id = p_tenant AND a.prompt_id = s.prompt_id
                       AND a.version = s.version)) END
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
         ORDER BY s.prompt_name;
END
$$;

ALTER FUNCTION registry_served_page_v1(uuid, text, text, integer) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION registry_served_count_v1(uuid, text) SET plan_cache_mode = force_custom_plan;
