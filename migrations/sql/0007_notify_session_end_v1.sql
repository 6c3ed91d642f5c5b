-- A session that ends (DELETE by its client through any worker, or evicted or purged) ends its open
-- GET stream on every worker: the worker holding the stream hears this. Ids only.

CREATE FUNCTION registry_notify_session_end_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify(
            'registry_changes', json_build_object('tenant', OLD.tenant_id, 'session', OLD.id)::text
        );
    ELSIF NEW.ended_at IS NOT NULL AND OLD.ended_at IS NULL THEN
        PERFORM pg_notify(
            'registry_changes', json_build_object('tenant', NEW.tenant_id, 'session', NEW.id)::text
        );
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER notify_session_end_v1 AFTER UPDATE OF ended_at OR DELETE ON mcp_sessions
    FOR EACH ROW EXECUTE FUNCTION registry_notify_session_end_v1();
