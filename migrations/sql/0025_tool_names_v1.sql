-- A marked prompt's MCP tool name, kept on its row so that tools/call finds the prompt through an
-- index. (An index on the expression would not do: under row-level security a condition on
-- translate() or left() of a column, functions that are not leakproof, is kept out of index scans,
-- and the lookup read every prompt.) The rule is registry.naming.TOOL_NAME_MAX and
-- TOOL_NAME_REPLACED, as registry.prompts.tools.tool_name applies them; a test holds the two equal.
-- NULL for a prompt that is not marked. Set by the database on every insert and on every update of
-- the columns it depends on, whichever release writes the row.

CREATE FUNCTION registry_prompt_tool_name_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.tool_name := CASE WHEN NEW.as_tool THEN translate(left(NEW.name, 64), '.:', '__') END;
    RETURN NEW;
END
$$;

CREATE TRIGGER tool_name_v1 BEFORE INSERT OR UPDATE OF name, as_tool, tool_name ON prompts
    FOR EACH ROW EXECUTE FUNCTION registry_prompt_tool_name_v1();

-- The prompts marked before: the trigger sets each one's.
UPDATE prompts SET tool_name = NULL WHERE as_tool;

CREATE INDEX ix_prompts_tenant_id_tool_name ON prompts (tenant_id, tool_name)
    WHERE tool_name IS NOT NULL;

-- The marked prompt that a label serves as a tool, for a tools/call this worker has not resolved
-- yet: its name and the version the label serves (no row when there is none; two only should two
-- marks ever share a tool name, a mark being checked, not constrained), in one round trip on the hot
-- path's plain pool. No ORDER BY: with one, the planner may walk the labels in name order instead of
-- taking the tool-name index. SECURITY INVOKER: it drops to the application role and sets the tenant
-- for the calling transaction, so row-level security applies as in tenant_tx.
CREATE FUNCTION registry_served_tool_v1(p_tenant uuid, p_label text, p_tool text)
    RETURNS TABLE (prompt_name text, served_version integer)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN QUERY
        SELECT p.name, l.version
          FROM prompts p
          JOIN labels l ON l.tenant_id = p.tenant_id AND l.prompt_id = p.id AND l.label = p_label
         WHERE p.tenant_id = p_tenant AND p.tool_name = p_tool AND p.archived_at IS NULL;
END
$$;
