-- Webhooks: endpoints, the outbox of deliveries and their attempts are tenant-owned (row-level
-- security, as every tenant table). The outbox is filled by a trigger on the change log, in the
-- transaction of the change itself: a committed change always has its deliveries, a rolled-back one
-- never does. Endpoints that are disabled, or that do not want the change's kind, get nothing.

DO $$
DECLARE
    tbl text;
BEGIN
    FOREACH tbl IN ARRAY ARRAY['webhook_endpoints', 'webhook_deliveries', 'webhook_attempts'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tbl);
        EXECUTE format(
            'CREATE POLICY tenant_isolation_v1 ON %I
                 USING (tenant_id = registry_current_tenant_v1())
                 WITH CHECK (tenant_id = registry_current_tenant_v1())',
            tbl
        );
    END LOOP;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_endpoints TO registry_app;
GRANT SELECT, INSERT, UPDATE ON webhook_deliveries TO registry_app;
GRANT SELECT, INSERT ON webhook_attempts TO registry_app;

CREATE FUNCTION registry_webhook_outbox_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, payload)
    SELECT NEW.tenant_id, e.id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), NEW.kind,
           jsonb_build_object(
               'type', NEW.kind,
               'timestamp', NEW.created_at,
               'data', jsonb_build_object(
                   'tenant', t.slug, 'seq', NEW.seq, 'prompt', p.name, 'label', NEW.label))
      FROM webhook_endpoints e
      JOIN tenants t ON t.id = NEW.tenant_id
      LEFT JOIN prompts p ON p.tenant_id = NEW.tenant_id AND p.id = NEW.prompt_id
     WHERE e.tenant_id = NEW.tenant_id
       AND e.disabled_at IS NULL
       AND (cardinality(e.events) = 0 OR NEW.kind = ANY (e.events));
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_outbox_v1 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v1();
