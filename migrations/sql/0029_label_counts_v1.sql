-- How many prompts each label serves, kept with the writes (issue 75): the first prompts/list page
-- chooses its size from it, and counting a 100,000-prompt label cost 100-300 ms of PostgreSQL's
-- CPU after every write to the tenant. A label row counts while its prompt is not archived; the
-- trigger below keeps the count as label rows come, go, and follow their prompt's archive. A label
-- move (a new version under the same label) changes no count and touches no counter row.
CREATE TABLE label_counts (
    tenant_id uuid NOT NULL,
    label text NOT NULL,
    served bigint NOT NULL DEFAULT 0,
    CONSTRAINT pk_label_counts PRIMARY KEY (tenant_id, label),
    CONSTRAINT fk_label_counts_tenant_id_tenants FOREIGN KEY (tenant_id)
        REFERENCES tenants (id) ON DELETE CASCADE
);
ALTER TABLE label_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE label_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON label_counts
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE ON label_counts TO registry_app;

INSERT INTO label_counts (tenant_id, label, served)
SELECT tenant_id, label, count(*) FROM labels WHERE NOT archived GROUP BY tenant_id, label;

-- Rows that come and go are counted once per statement, from its transition table (a bulk load of
-- 100,000 prompts pays one upsert per label, not one per row); a prompt archived or brought back
-- updates its few label rows' archived copy (0016), counted per row.
CREATE FUNCTION registry_label_count_added_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO label_counts AS c (tenant_id, label, served)
    SELECT tenant_id, label, count(*) FROM added WHERE NOT archived GROUP BY tenant_id, label
    ON CONFLICT (tenant_id, label) DO UPDATE SET served = c.served + EXCLUDED.served;
    RETURN NULL;
END
$$;

-- An update only: when the tenant itself is deleted, its counters went first.
CREATE FUNCTION registry_label_count_removed_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE label_counts c SET served = c.served - r.n
      FROM (SELECT tenant_id, label, count(*) AS n FROM removed WHERE NOT archived
             GROUP BY tenant_id, label) r
     WHERE c.tenant_id = r.tenant_id AND c.label = r.label;
    RETURN NULL;
END
$$;

CREATE FUNCTION registry_label_count_archived_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF OLD.archived IS DISTINCT FROM NEW.archived THEN
        INSERT INTO label_counts AS c (tenant_id, label, served)
        VALUES (NEW.tenant_id, NEW.label, CASE WHEN NEW.archived THEN -1 ELSE 1 END)
        ON CONFLICT (tenant_id, label) DO UPDATE SET served = c.served + EXCLUDED.served;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER label_count_added_v1 AFTER INSERT ON labels
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION registry_label_count_added_v1();
CREATE TRIGGER label_count_removed_v1 AFTER DELETE ON labels
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION registry_label_count_removed_v1();
CREATE TRIGGER label_count_archived_v1 AFTER UPDATE OF archived ON labels
    FOR EACH ROW EXECUTE FUNCTION registry_label_count_archived_v1();

-- The count a label serves, read from its counter (registry_served_count_v2, which counted the
-- label's rows, stays for workers of the release before).
CREATE FUNCTION registry_served_count_v3(p_tenant uuid, p_label text)
    RETURNS bigint
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN coalesce(
        (SELECT served FROM label_counts WHERE tenant_id = p_tenant AND label = p_label), 0
    );
END
$$;
