-- Each label row carries what an uncached prompts/list page needs of it: its version's stored list
-- entry (prompt_versions.list_entry, 0015) and whether its prompt is archived. A page of a label is
-- then its index range scan alone, with no prompt or version row read per entry (docs/benchmarks.md,
-- fourth pass). Triggers keep both copies true whoever writes: a label written or moved takes its
-- version's entry and its prompt's state; archiving or restoring a prompt updates its labels. Both
-- run as the writer (SECURITY INVOKER), so row-level security applies as to the write itself.

ALTER TABLE labels ADD COLUMN list_entry text,
                   ADD COLUMN archived boolean NOT NULL DEFAULT false;

UPDATE labels l
   SET list_entry = v.list_entry, archived = p.archived_at IS NOT NULL
  FROM prompt_versions v, prompts p
 WHERE v.tenant_id = l.tenant_id AND v.prompt_id = l.prompt_id AND v.version = l.version
   AND p.tenant_id = l.tenant_id AND p.id = l.prompt_id;

CREATE FUNCTION registry_label_served_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    SELECT v.list_entry INTO NEW.list_entry
      FROM prompt_versions v
     WHERE v.tenant_id = NEW.tenant_id AND v.prompt_id = NEW.prompt_id AND v.version = NEW.version;
    SELECT p.archived_at IS NOT NULL INTO NEW.archived
      FROM prompts p
     WHERE p.tenant_id = NEW.tenant_id AND p.id = NEW.prompt_id;
    NEW.archived := coalesce(NEW.archived, false);  -- no prompt: the foreign key refuses the row
    RETURN NEW;
END
$$;

CREATE TRIGGER label_served_v1 BEFORE INSERT OR UPDATE OF tenant_id, prompt_id, version ON labels
    FOR EACH ROW EXECUTE FUNCTION registry_label_served_v1();

CREATE FUNCTION registry_prompt_archived_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE labels SET archived = NEW.archived_at IS NOT NULL
     WHERE tenant_id = NEW.tenant_id AND prompt_id = NEW.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER prompt_archived_v1 AFTER UPDATE OF archived_at ON prompts
    FOR EACH ROW WHEN ((OLD.archived_at IS NULL) <> (NEW.archived_at IS NULL))
    EXECUTE FUNCTION registry_prompt_archived_v1();

-- registry_served_entries_v1 and registry_served_count_v1 as the label rows alone answer them. A label
-- whose version was written before 0015 has no entry: its row comes back with the version's fields
-- ("served", read only for such a row), as in v1.
CREATE FUNCTION registry_served_entries_v2(p_tenant uuid, p_label text, p_after text, p_limit integer)
    RETURNS TABLE (name text, entry text, served json)
    LANGUAGE plpgsql
    SET plan_cache_mode = force_custom_plan
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN QUERY
        SELECT l.prompt_name, l.list_entry,
               CASE WHEN l.list_entry IS NULL THEN (
                   SELECT json_build_array(
                              l.version, v.title, v.description, v.icons,
                              (SELECT json_agg(json_build_array(
                                          a.name, a.title, a.description, a.required, a."default",
                                          a.enum, a.pattern, a.max_length)
                                      ORDER BY a.position)
                                 FROM prompt_arguments a
                                WHERE a.tenant_id = p_tenant AND a.prompt_id = l.prompt_id
                                  AND a.version = l.version))
                     FROM prompt_versions v
                    WHERE v.tenant_id = p_tenant AND v.prompt_id = l.prompt_id
                      AND v.version = l.version) END
          FROM labels l
         WHERE l.tenant_id = p_tenant AND l.label = p_label
           AND l.prompt_name > coalesce(p_after, '')
           AND NOT l.archived
         ORDER BY l.prompt_name
         LIMIT p_limit;
END
$$;

CREATE FUNCTION registry_served_count_v2(p_tenant uuid, p_label text)
    RETURNS bigint
    LANGUAGE plpgsql
    SET plan_cache_mode = force_custom_plan
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN (
        SELECT count(*) FROM labels l
         WHERE l.tenant_id = p_tenant AND l.label = p_label AND NOT l.archived
    );
END
$$;
