-- The Events extension's webhook subscriptions (issue 73, SEP-3415's events/subscribe): one row per
-- subscription key (principal, callback URL, event type, arguments), tenant-owned under row-level
-- security like every tenant table. A row exists only once its callback endpoint proved its intent
-- (the verification handshake), so a row is also the verification of (principal, url).
--
-- `position` is the subscription's watermark in the tenant's change log: every event at or before it
-- was acknowledged by the endpoint or abandoned. The dispatcher of any worker leases a subscription
-- whose tenant's log has moved past its position (`lease`, `leased_until`), POSTs what follows, in
-- order, and moves the position after each acknowledgement, checking the lease: a worker stopped
-- mid-delivery leaves the position where it was, and another takes over once the lease runs out.
CREATE TABLE event_subscriptions (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id text NOT NULL,                   -- sub_<hex>: derived from the key, a routing handle only
    principal text NOT NULL,            -- key:<uuid> or token:<sub from iss>
    url text NOT NULL,
    name text NOT NULL,
    arguments jsonb NOT NULL DEFAULT '{}'::jsonb,
    secret text NOT NULL,
    previous_secret text,               -- still signs, after a rotation, until previous_until
    previous_until timestamptz,
    expires_at timestamptz NOT NULL,    -- refreshBefore: the grant
    position bigint NOT NULL,
    attempts integer NOT NULL DEFAULT 0,   -- failed tries of the event after the position
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease uuid,
    leased_until timestamptz,
    active boolean NOT NULL DEFAULT true,  -- false: suspended after sustained failure
    last_delivery_at timestamptz,
    last_error text,                    -- one of the draft's categories, never the endpoint's words
    failed_since timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_event_subscriptions PRIMARY KEY (tenant_id, id),
    CONSTRAINT event_subscription_arguments_object CHECK (jsonb_typeof(arguments) = 'object')
);
CREATE INDEX ix_event_subscriptions_due ON event_subscriptions (tenant_id, next_attempt_at)
    WHERE active;
CREATE INDEX ix_event_subscriptions_principal ON event_subscriptions (tenant_id, principal, url);
ALTER TABLE event_subscriptions ENABLE ROW LEVEL SECURITY;
ALTER TABLE event_subscriptions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON event_subscriptions
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON event_subscriptions TO registry_app;

-- Workers look for event deliveries when a change of a tenant with an active subscription
-- commits, told on the channel every worker listens to with the outbox's own payload
-- ({"tenant": ..., "webhooks": true}, folded into one per transaction by NOTIFY); the periodic
-- look for retries that are due stays. The trigger's name sorts after the outbox's (triggers of one
-- event fire in name order), so the first of the folded notifications stays where it was.
CREATE FUNCTION registry_event_wakeup_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM event_subscriptions WHERE tenant_id = NEW.tenant_id AND active) THEN
        PERFORM pg_notify(
            'registry_changes', json_build_object('tenant', NEW.tenant_id, 'webhooks', true)::text
        );
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_wakeup_events_v1 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_event_wakeup_v1();
