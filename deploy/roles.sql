-- Roles for an external PostgreSQL. Run once, as a superuser, with psql:
--   psql "$SUPERUSER_URL" -v owner_password="$OWNER_PASSWORD" -f deploy/roles.sql
--
-- registry_owner: the role in REGISTRY_DATABASE_URL. It runs the migrations and owns the schema.
--   BYPASSRLS lets operator commands that span tenants (`registry key revoke KEY_ID`) find their row;
--   tenant requests never use it: they drop to registry_app first.
-- registry_app: what every tenant-scoped transaction runs as (SET LOCAL ROLE). It cannot log in,
--   owns nothing and cannot bypass row-level security; the migrations grant it what it needs.

CREATE ROLE registry_owner LOGIN PASSWORD :'owner_password' BYPASSRLS;
CREATE ROLE registry_app NOLOGIN NOBYPASSRLS;
GRANT registry_app TO registry_owner;

CREATE DATABASE registry OWNER registry_owner;
\connect registry
-- PostgreSQL 15+ no longer lets every role create objects in public.
ALTER SCHEMA public OWNER TO registry_owner;
