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
