-- Workers look for webhook deliveries when a change filled the outbox, not after every change.
--
-- Each worker's dispatcher was woken by every committed change it heard of, and looked for due
-- deliveries in a transaction of its own (three round trips), although most tenants have no
-- endpoint and most changes queue nothing: under steady writes that was a claim per change per
-- worker. The outbox trigger now says when it queued deliveries, on the channel every worker
-- listens to, with a payload of its own ({"tenant": ..., "webhooks": true}); NOTIFY folds identical
-- payloads of one transaction into one. The periodic look for retries that are due stays.
--
-- Workers of the previous release hear the new payload as a change of the tenant with no sequence
-- number (they drop their cached copies of the tenant once more), and go on looking after every
-- change until they are restarted.

CREATE FUNCTION registry_webhook_outbox_v2() RETURNS trigger
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
    IF FOUND THEN
        PERFORM pg_notify(
            'registry_changes', json_build_object('tenant', NEW.tenant_id, 'webhooks', true)::text
        );
    END IF;
    RETURN NULL;
END
$$;

-- registry_webhook_outbox_v1 stays: a downgrade puts its trigger back.
DROP TRIGGER webhook_outbox_v1 ON change_log;

CREATE TRIGGER webhook_outbox_v2 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v2();
