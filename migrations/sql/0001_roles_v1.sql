-- The application role: what tenant-scoped transactions run as (SET LOCAL ROLE registry_app).
-- It owns nothing and cannot bypass row-level security. Roles are cluster-wide, so it is created
-- only when missing (deploy/roles.sql creates it beforehand where the migrator may not create roles).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'registry_app') THEN
        CREATE ROLE registry_app NOLOGIN NOBYPASSRLS;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO registry_app;

-- The tenant directory and the server's own secrets.
GRANT SELECT, INSERT, UPDATE, DELETE ON tenants TO registry_app;
GRANT SELECT ON registry_secrets TO registry_app;

-- Mutable tenant-owned state.
GRANT SELECT, INSERT, UPDATE, DELETE ON api_keys, prompts, labels, mcp_sessions TO registry_app;
GRANT SELECT, INSERT, DELETE ON blobs TO registry_app;

-- Immutable or append-only: no UPDATE, no DELETE for the application (removal only by cascade).
GRANT SELECT, INSERT ON prompt_versions, prompt_arguments, prompt_messages,
    label_history, change_log, audit_log TO registry_app;
