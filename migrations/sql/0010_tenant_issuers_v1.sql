-- The OAuth issuers a tenant trusts: tenant-owned, under row-level security like every tenant table.
ALTER TABLE tenant_issuers ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_issuers FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON tenant_issuers
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_issuers TO registry_app;

-- Who may call changes when a tenant's trusted issuers or its acceptance of API keys change: every
-- worker drops the credentials it has checked for that tenant (the 'auth' kind of 0002) and checks
-- its open streams again.
CREATE FUNCTION registry_notify_tenant_auth_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('registry_changes',
        json_build_object('tenant', COALESCE(NEW.tenant_id, OLD.tenant_id), 'auth', true)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER notify_issuers_v1 AFTER INSERT OR UPDATE OR DELETE ON tenant_issuers
    FOR EACH ROW EXECUTE FUNCTION registry_notify_tenant_auth_v1();

CREATE FUNCTION registry_notify_api_keys_switch_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('registry_changes', json_build_object('tenant', NEW.id, 'auth', true)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER notify_api_keys_switch_v1 AFTER UPDATE OF api_keys ON tenants
    FOR EACH ROW WHEN (OLD.api_keys IS DISTINCT FROM NEW.api_keys)
    EXECUTE FUNCTION registry_notify_api_keys_switch_v1();
