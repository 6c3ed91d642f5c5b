-- A tenant's change sequence moves from its tenants row to a row of its own.
--
-- Every change of a tenant bumped tenants.change_seq as its transaction committed. Under steady
-- writes that turned the tenant's row into a chain of dead versions (and, once its page filled,
-- an index entry per version that only VACUUM removes), and every lookup of the tenant and every
-- foreign-key check against it walked the chain: a version write makes three (the tenant by slug,
-- and a key-share lock from the audit and change-log rows), which took about a millisecond each
-- after a few thousand writes to one tenant, against microseconds on a quiet row. Here the counter
-- is a narrow row in a table with room on its pages for updates in place, and nothing else reads
-- it on a write: tenants keeps the rows that are looked up, and they no longer change per write.
--
-- The number is still taken inside the commit and the row lock still lasts until the commit ends,
-- so a tenant's sequence numbers still commit in order, without gaps (see 0014).
--
-- tenants.change_seq stays, no longer written, so that workers of the previous release keep
-- running until they are restarted (they read it as a sequence that no longer moves: their new
-- listen streams start from it and hear one change too many); a later revision drops it.

CREATE TABLE change_sequences (
    tenant_id uuid NOT NULL,
    seq bigint NOT NULL DEFAULT 0,
    CONSTRAINT pk_change_sequences PRIMARY KEY (tenant_id),
    CONSTRAINT fk_change_sequences_tenant_id_tenants FOREIGN KEY (tenant_id)
        REFERENCES tenants (id) ON DELETE CASCADE
) WITH (fillfactor = 20);

GRANT SELECT, INSERT, UPDATE ON change_sequences TO registry_app;

-- Writers of the previous release bump tenants.change_seq until this transaction commits: the
-- copy waits for them, and they for it.
LOCK TABLE tenants IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO change_sequences (tenant_id, seq) SELECT id, change_seq FROM tenants;

-- A new tenant starts at 0.
CREATE FUNCTION registry_tenant_sequence_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO change_sequences (tenant_id) VALUES (NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER tenant_sequence_v1 AFTER INSERT ON tenants
    FOR EACH ROW EXECUTE FUNCTION registry_tenant_sequence_v1();

CREATE FUNCTION registry_change_seq_v2() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE change_sequences SET seq = seq + 1
        WHERE tenant_id = NEW.tenant_id
        RETURNING seq INTO NEW.seq;
    IF NEW.seq IS NULL THEN
        RAISE EXCEPTION 'unknown tenant %', NEW.tenant_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER assign_seq_v1 ON change_log;

CREATE TRIGGER assign_seq_v2 BEFORE INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_change_seq_v2();
