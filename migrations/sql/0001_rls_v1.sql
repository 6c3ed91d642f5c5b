-- Row-level security: every tenant-owned table shows and accepts only the rows of the tenant set
-- for the current transaction with set_config('registry.tenant_id', <uuid>, true).
-- With no tenant set the setting is NULL or '' and nothing matches: fail closed.

CREATE FUNCTION registry_current_tenant_v1() RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT NULLIF(current_setting('registry.tenant_id', true), '')::uuid $$;

DO $$
DECLARE
    tbl text;
BEGIN
    FOREACH tbl IN ARRAY ARRAY[
        'api_keys', 'blobs', 'prompts', 'prompt_versions', 'prompt_arguments', 'prompt_messages',
        'labels', 'label_history', 'change_log', 'audit_log', 'mcp_sessions'
    ] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
        -- FORCE: the table owner is held to the policy too (only superusers and BYPASSRLS roles are not).
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
