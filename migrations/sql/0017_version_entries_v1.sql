-- A version written before 0015 has no stored list entry, so every uncached page that lists it reads
-- its fields and arguments and shapes them in the worker. Its entry may now be filled in once, by the
-- schema's owner (the application role has no UPDATE on versions; migration 0017 fills every missing
-- entry): a version stays immutable in everything it says, and the entry, derived from it, goes from
-- NULL to its value and never changes again. Labels pointing at the version take the entry with it.

CREATE FUNCTION registry_forbid_version_change_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' AND pg_trigger_depth() > 1 THEN
        RETURN OLD;  -- the cascade of a deleted prompt or tenant, as registry_forbid_change_v1
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.list_entry IS NULL AND NEW.list_entry IS NOT NULL
       AND to_jsonb(NEW) - 'list_entry' = to_jsonb(OLD) - 'list_entry' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'rows of % are immutable', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation', HINT = 'write a new version or a new row instead';
END
$$;

DROP TRIGGER immutable_v1 ON prompt_versions;

CREATE TRIGGER immutable_v2 BEFORE UPDATE OR DELETE ON prompt_versions
    FOR EACH ROW EXECUTE FUNCTION registry_forbid_version_change_v1();

CREATE FUNCTION registry_version_entry_filled_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE labels SET list_entry = NEW.list_entry
     WHERE tenant_id = NEW.tenant_id AND prompt_id = NEW.prompt_id AND version = NEW.version;
    RETURN NULL;
END
$$;

CREATE TRIGGER entry_filled_v1 AFTER UPDATE OF list_entry ON prompt_versions
    FOR EACH ROW EXECUTE FUNCTION registry_version_entry_filled_v1();
