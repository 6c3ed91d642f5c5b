-- A change-log row takes its tenant's next sequence number as its transaction commits, not when the
-- application appends it. The number still comes from the tenant row (registry_change_seq_v1), whose
-- lock is held until the commit ends, so numbers still commit in order and without gaps; but the
-- lock is now taken inside the commit itself, after the last statement of the transaction, so a
-- tenant's writers wait on one another for the commit's own work only, never for a client's round
-- trip (between its last statement and its COMMIT, a busy worker may take milliseconds).
--
-- The application inserts each change into change_pending; a deferred constraint trigger moves it
-- to change_log at commit, in the order the changes were appended (deferred trigger events fire in
-- the order they were queued). A pending row never outlives its transaction: the trigger deletes
-- it, and a rollback discards it. The table is unlogged: its rows are never committed, so there is
-- nothing to recover or to replicate.

CREATE UNLOGGED TABLE change_pending (
    tenant_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    kind text NOT NULL,
    prompt_id uuid,
    label text,
    CONSTRAINT pk_change_pending PRIMARY KEY (tenant_id, id)
);

ALTER TABLE change_pending ENABLE ROW LEVEL SECURITY;
ALTER TABLE change_pending FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON change_pending
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());

GRANT SELECT, INSERT, DELETE ON change_pending TO registry_app;

CREATE FUNCTION registry_commit_change_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- seq 0 is replaced by assign_seq_v1; created_at is the moment of committing.
    INSERT INTO change_log (tenant_id, seq, kind, prompt_id, label, created_at)
    VALUES (NEW.tenant_id, 0, NEW.kind, NEW.prompt_id, NEW.label, clock_timestamp());
    DELETE FROM change_pending WHERE tenant_id = NEW.tenant_id AND id = NEW.id;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER commit_change_v1 AFTER INSERT ON change_pending
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION registry_commit_change_v1();
