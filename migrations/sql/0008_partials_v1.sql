-- Partial locks: the exact child version each partial tag of a version was resolved to when the
-- version was written. Tenant-owned (row-level security) and immutable like the version they belong
-- to; a child version that some lock names cannot be deleted (the foreign key restricts it).

ALTER TABLE prompt_partials ENABLE ROW LEVEL SECURITY;
ALTER TABLE prompt_partials FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON prompt_partials
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());

CREATE TRIGGER immutable_v1 BEFORE UPDATE OR DELETE ON prompt_partials
    FOR EACH ROW EXECUTE FUNCTION registry_forbid_change_v1();

GRANT SELECT, INSERT ON prompt_partials TO registry_app;
