-- Immutable rows: prompt versions, their arguments and messages, and the append-only logs.
-- UPDATE is always refused. DELETE is refused too, except when it comes from the ON DELETE CASCADE of
-- a parent row (a deleted prompt or tenant): cascades run from the referential-integrity trigger, so
-- they arrive here one trigger level deeper than a statement issued by a client.
CREATE FUNCTION registry_forbid_change_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' AND pg_trigger_depth() > 1 THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'rows of % are immutable', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation', HINT = 'write a new version or a new row instead';
END
$$;

DO $$
DECLARE
    tbl text;
BEGIN
    FOREACH tbl IN ARRAY ARRAY[
        'prompt_versions', 'prompt_arguments', 'prompt_messages',
        'label_history', 'change_log', 'audit_log'
    ] LOOP
        EXECUTE format(
            'CREATE TRIGGER immutable_v1 BEFORE UPDATE OR DELETE ON %I
                 FOR EACH ROW EXECUTE FUNCTION registry_forbid_change_v1()',
            tbl
        );
    END LOOP;
END
$$;

-- The per-tenant change sequence: each change_log row takes the next number of its tenant.
-- The UPDATE holds the tenant row lock until commit, so sequence numbers commit in order, gap-free.
CREATE FUNCTION registry_change_seq_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE tenants SET change_seq = change_seq + 1
        WHERE id = NEW.tenant_id
        RETURNING change_seq INTO NEW.seq;
    IF NEW.seq IS NULL THEN
        RAISE EXCEPTION 'unknown tenant %', NEW.tenant_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER assign_seq_v1 BEFORE INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_change_seq_v1();

-- Tell every listener that a tenant changed. NOTIFY is delivered only when the transaction commits
-- (never on rollback). The payload carries ids only, never prompt bodies.
CREATE FUNCTION registry_notify_change_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify(
        'registry_changes',
        json_build_object('tenant', NEW.tenant_id, 'seq', NEW.seq)::text
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER notify_v1 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_notify_change_v1();

