-- Skills are tenant-owned: under row-level security like every tenant table. Versions and their
-- files are immutable once written: the application role may insert them, never update them.
ALTER TABLE skills ENABLE ROW LEVEL SECURITY;
ALTER TABLE skills FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skills
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON skills TO registry_app;

ALTER TABLE skill_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE skill_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skill_versions
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT ON skill_versions TO registry_app;

ALTER TABLE skill_files ENABLE ROW LEVEL SECURITY;
ALTER TABLE skill_files FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skill_files
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT ON skill_files TO registry_app;

ALTER TABLE skill_labels ENABLE ROW LEVEL SECURITY;
ALTER TABLE skill_labels FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON skill_labels
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE, DELETE ON skill_labels TO registry_app;

-- Immutable, as prompt versions are (a cascade from a deleted skill or tenant still removes them).
CREATE TRIGGER immutable_v1 BEFORE UPDATE OR DELETE ON skill_versions
    FOR EACH ROW EXECUTE FUNCTION registry_forbid_change_v1();
CREATE TRIGGER immutable_v1 BEFORE UPDATE OR DELETE ON skill_files
    FOR EACH ROW EXECUTE FUNCTION registry_forbid_change_v1();
