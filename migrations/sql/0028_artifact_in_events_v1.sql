-- Webhook payloads say which kind of artifact a change is about ('artifact': 'prompt' or 'skill';
-- null for a change of the tenant or a change request's review), the same field the change stream
-- carries, from the same rule (registry.artifacts.kinds: a kind's change-log kinds by prefix).
CREATE FUNCTION registry_webhook_outbox_v5() RETURNS trigger
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
                   'label', NEW.label,
                   'artifact', CASE
                       WHEN NEW.kind LIKE 'skill.%' THEN 'skill'
                       WHEN NEW.kind LIKE 'label.%' OR NEW.kind LIKE 'prompt.%' THEN 'prompt'
                   END) || coalesce(NEW.detail, '{}'::jsonb))
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

-- registry_webhook_outbox_v4 stays: a downgrade puts its trigger back.
DROP TRIGGER webhook_outbox_v4 ON change_log;
CREATE TRIGGER webhook_outbox_v5 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v5();
