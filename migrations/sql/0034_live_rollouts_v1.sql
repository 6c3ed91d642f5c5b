-- What serving needs of a tenant's live rollouts, in one round trip on the hot path's plain pool,
-- as registry_served_version_v3 does (the application role, the tenant set for the statement's own
-- transaction), instead of an ORM transaction: a worker reads them after every change of a tenant
-- that has some. ``share`` is the percent of callers on the new side at the current step.
CREATE FUNCTION registry_live_rollouts_v1(p_tenant uuid)
    RETURNS TABLE (id bigint, kind text, name text, label text, from_version integer,
                   to_version integer, step integer, share integer, salt bytea)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN QUERY
        SELECT r.id, r.kind, r.name, r.label, r.from_version, r.to_version, r.step,
               r.steps[r.step + 1], r.salt
          FROM rollouts r
         WHERE r.tenant_id = p_tenant AND r.state IN ('running', 'paused')
         ORDER BY r.id;
END
$$;
