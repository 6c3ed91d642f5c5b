-- Caches in every worker hold tenant settings and credentials; these notifications tell them to drop
-- what they hold for a tenant. Payloads carry ids only. Served-list changes keep going through the
-- change log (registry_notify_change_v1); these two kinds never reach MCP clients.

CREATE FUNCTION registry_notify_tenant_gone_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('registry_changes', json_build_object('tenant', OLD.id, 'deleted', true)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER notify_gone_v1 AFTER DELETE ON tenants
    FOR EACH ROW EXECUTE FUNCTION registry_notify_tenant_gone_v1();

CREATE FUNCTION registry_notify_key_change_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('registry_changes', json_build_object('tenant', OLD.tenant_id, 'auth', true)::text);
    RETURN NULL;
END
$$;

-- last_used_at moves on use and is no reason to drop a cached credential.
CREATE TRIGGER notify_key_v1 AFTER UPDATE OF role, revoked_at, expires_at, secret_hash OR DELETE
    ON api_keys FOR EACH ROW EXECUTE FUNCTION registry_notify_key_change_v1();
