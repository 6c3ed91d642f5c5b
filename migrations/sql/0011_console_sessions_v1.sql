-- Console sessions are tenant-owned: under row-level security like every tenant table.
ALTER TABLE console_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE console_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON console_sessions
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON console_sessions TO registry_app;
