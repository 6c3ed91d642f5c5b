-- Skills are tenant-owned: under row-level security like every tenant table. Versions and their
-- files are immutable once written: the application role may insert them, never update them.
ALTER TABLE skills ENABLE ROW LEVEL SECURITY;
ALTER TABLE skills FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skills
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON skills TO registry_app;

ALTER TABLE skill_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE skill_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skill_versions
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT ON skill_versions TO registry_app;

ALTER TABLE skill_files ENABLE ROW LEVEL SECURITY;
ALTER TABLE skill_files FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skill_files
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT ON skill_files TO registry_app;

ALTER TABLE skill_labels ENABLE ROW LEVEL SECURITY;
ALTER TABLE skill_labels FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skill_labels
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON skill_labels TO registry_app;

-- Immutable, as prompt versions are (a cascade from a deleted skill or tenant still removes them).
CREATE TRIGGER immutable_v1 BEFORE UPDATE OR DELETE ON skill_versions
    FOR EACH ROW EXECUTE FUNCTION registry_forbid_change_v1();
CREATE TRIGGER immutable_v1 BEFORE UPDATE OR DELETE ON skill_files
    FOR EACH ROW EXECUTE FUNCTION registry_forbid_change_v1();

-- Webhook payloads name the skill of a skill.* change (as they name the prompt of the others).
CREATE FUNCTION registry_webhook_outbox_v3() RETURNS trigger
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
                   'label', NEW.label))
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

-- registry_webhook_outbox_v2 stays: a downgrade puts its trigger back.
DROP TRIGGER webhook_outbox_v2 ON change_log;

CREATE TRIGGER webhook_outbox_v3 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v3();
