-- Change requests: tenant-owned, under row-level security like every tenant table.
ALTER TABLE change_requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE change_requests FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON change_requests
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE ON change_requests TO registry_app;

ALTER TABLE change_request_moves ENABLE ROW LEVEL SECURITY;
ALTER TABLE change_request_moves FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON change_request_moves
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON change_request_moves TO registry_app;

-- Reviews are appended, never changed.
ALTER TABLE change_request_reviews ENABLE ROW LEVEL SECURITY;
ALTER TABLE change_request_reviews FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON change_request_reviews
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT ON change_request_reviews TO registry_app;

-- A change carries a detail (a change request's id and moves) from its pending row to the log.
CREATE FUNCTION registry_commit_change_v2() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO change_log (tenant_id, seq, kind, prompt_id, label, created_at, detail)
    VALUES (NEW.tenant_id, 0, NEW.kind, NEW.prompt_id, NEW.label, clock_timestamp(), NEW.detail);
    DELETE FROM change_pending WHERE tenant_id = NEW.tenant_id AND id = NEW.id;
    RETURN NULL;
END
$$;

-- registry_commit_change_v1 stays: a downgrade puts its trigger back.
DROP TRIGGER commit_change_v1 ON change_pending;
CREATE CONSTRAINT TRIGGER commit_change_v2 AFTER INSERT ON change_pending
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION registry_commit_change_v2();

-- A change request's review events (opened, approved, rejected, withdrawn, stale) change nothing a
-- label serves: their notification says so ("serves": false), so workers keep their caches and tell
-- no MCP stream; only the change stream and webhooks carry them. A request applied is a change.
CREATE FUNCTION registry_notify_change_v3() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify(
        'registry_changes',
        json_build_object(
            'tenant', NEW.tenant_id, 'seq', NEW.seq, 'label', NEW.label,
            'serves', NOT (NEW.kind LIKE 'change_request.%' AND NEW.kind <> 'change_request.applied')
        )::text
    );
    RETURN NULL;
END
$$;

-- registry_notify_change_v2 stays: a downgrade puts its trigger back.
DROP TRIGGER notify_v2 ON change_log;
CREATE TRIGGER notify_v3 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_notify_change_v3();

-- Webhook payloads carry a change's detail beside what they carried (a change request's id, state
-- and moves).
CREATE FUNCTION registry_webhook_outbox_v4() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, payload)
    SELECT NEW.tenant_id, e.id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), NEW.kind,
           jsonb_build_object(
               'type', NEW.kind,
               'timestamp', NEW.created_at,
               'data', jsonb_build_object(
                   'tenant', t.slug, 'seq', NEW.seq, 'prompt', p.name, 'skill', s.name,
                   'label', NEW.label) || coalesce(NEW.detail, '{}'::jsonb))
      FROM webhook_endpoints e
      JOIN tenants t ON t.id = NEW.tenant_id
      LEFT JOIN prompts p ON p.tenant_id = NEW.tenant_id AND p.id = NEW.prompt_id
                         AND NEW.kind NOT LIKE 'skill.%'
      LEFT JOIN skills s ON s.tenant_id = NEW.tenant_id AND s.id = NEW.prompt_id
                        AND NEW.kind LIKE 'skill.%'
     WHERE e.tenant_id = NEW.tenant_id
       AND e.disabled_at IS NULL
       AND (cardinality(e.events) = 0 OR NEW.kind = ANY (e.events));
    IF FOUND THEN
        PERFORM pg_notify(
            'registry_changes', json_build_object('tenant', NEW.tenant_id, 'webhooks', true)::text
        );
    END IF;
    RETURN NULL;
END
$$;

-- registry_webhook_outbox_v3 stays: a downgrade puts its trigger back.
DROP TRIGGER webhook_outbox_v3 ON change_log;
CREATE TRIGGER webhook_outbox_v4 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v4();
