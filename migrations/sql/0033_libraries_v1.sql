-- Shared libraries (issue 71): a tenant (the library) offers what one of its labels serves to a
-- named tenant, or to every tenant of the deployment; that tenant (the subscriber) accepts it,
-- following the label or pinning versions. Each side's consent is a row of its own tenant, under
-- that tenant's row-level security, so neither side can write the other's; each sees of the other
-- only the consent addressed to it (the SELECT policies below), and a subscriber reads a library
-- only with both (registry_library_grant_v1).
CREATE TABLE library_offers (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id bigint GENERATED ALWAYS AS IDENTITY,
    subscriber_id uuid REFERENCES tenants (id) ON DELETE CASCADE,  -- NULL: every tenant
    label text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_library_offers PRIMARY KEY (tenant_id, id),
    CONSTRAINT library_offer_not_self CHECK (subscriber_id IS DISTINCT FROM tenant_id)
);
-- One offer per library and subscriber (the all-tenants offer counts as one subscriber).
CREATE UNIQUE INDEX ix_library_offers_to ON library_offers
    (tenant_id, coalesce(subscriber_id, '00000000-0000-0000-0000-000000000000'::uuid));
ALTER TABLE library_offers ENABLE ROW LEVEL SECURITY;
ALTER TABLE library_offers FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON library_offers
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON library_offers TO registry_app;

CREATE TABLE library_subscriptions (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    library_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    label text NOT NULL,
    follow boolean NOT NULL DEFAULT true,
    pins jsonb NOT NULL DEFAULT '{}'::jsonb,
    prefix text,
    accepted_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_library_subscriptions PRIMARY KEY (tenant_id, library_id),
    CONSTRAINT library_subscription_not_self CHECK (library_id <> tenant_id),
    CONSTRAINT library_pins_object CHECK (jsonb_typeof(pins) = 'object')
);
ALTER TABLE library_subscriptions ENABLE ROW LEVEL SECURITY;
ALTER TABLE library_subscriptions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON library_subscriptions
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON library_subscriptions TO registry_app;

-- No index leads with the other side's id (every index leads with tenant_id, docs/scale-out.md):
-- a subscriber finds a library's offer through the library's key, and a library's subscribers are
-- read by a scan of a table that holds one row per subscription (few).
-- What each side may see of the other's consent, and nothing more: a tenant reads the offers made
-- to it (by name or to every tenant); a library reads the subscriptions made to it. Permissive
-- policies beside the tenant's own (they add rows to SELECT only: nobody writes the other side's).
CREATE POLICY offered_to_v1 ON library_offers FOR SELECT
    USING (subscriber_id = registry_current_tenant_v1() OR subscriber_id IS NULL);
CREATE POLICY subscribed_to_v1 ON library_subscriptions FOR SELECT
    USING (library_id = registry_current_tenant_v1());

-- The label of ``p_library`` the calling tenant may read: the one it accepted while the library
-- still offers that label to it (to it by name first, else to every tenant); NULL otherwise. What
-- serving asks before it reads anything of a library.
CREATE FUNCTION registry_library_grant_v1(p_library uuid)
    RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT s.label
      FROM library_subscriptions s
     WHERE s.tenant_id = registry_current_tenant_v1() AND s.library_id = p_library
       AND s.label = (SELECT o.label FROM library_offers o
                       WHERE o.tenant_id = p_library
                         AND (o.subscriber_id = s.tenant_id OR o.subscriber_id IS NULL)
                       ORDER BY o.subscriber_id NULLS LAST LIMIT 1)
$$;
