-- The API key of a tenant with this SHA-256, for the round trip that starts every REST request and
-- MCP session: that statement finds the tenant by its name and scopes its transaction to it, and
-- reads the caller's key beside it through this function (one round trip instead of two).
-- SECURITY INVOKER: it drops to the application role and sets the tenant for the calling transaction
-- first, so row-level security applies to the read exactly as in tenant_tx; the calling statement
-- sets the same two settings again, whichever of the two runs first.

CREATE FUNCTION registry_api_key_v1(p_tenant uuid, p_hash bytea)
    RETURNS TABLE (id uuid, role text, expires_at timestamptz, revoked_at timestamptz,
                   last_used_at timestamptz)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN QUERY
        SELECT k.id, k.role, k.expires_at, k.revoked_at, k.last_used_at
          FROM api_keys k
         WHERE k.tenant_id = p_tenant AND k.secret_hash = p_hash;
END
$$;
