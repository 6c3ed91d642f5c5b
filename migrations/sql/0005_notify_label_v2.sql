-- The change notification names the label the change moved (null: any label may have changed, as
-- for an archived prompt or new tenant settings), so a worker whose listener saw every notification
-- of a range knows which streams to tell without reading the change log back.

CREATE FUNCTION registry_notify_change_v2() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify(
        'registry_changes',
        json_build_object('tenant', NEW.tenant_id, 'seq', NEW.seq, 'label', NEW.label)::text
    );
    RETURN NULL;
END
$$;

DROP TRIGGER notify_v1 ON change_log;

CREATE TRIGGER notify_v2 AFTER INSERT ON change_log
    FOR EACH ROW EXECUTE FUNCTION registry_notify_change_v2();

DROP FUNCTION registry_notify_change_v1();
