-- The serve ledger (issue 69): how many answers served each version of each prompt and skill, by
-- label, surface, caller and client, per minute, hour and day. Workers count in memory and write
-- their counts in one statement per flush (registry/usage/repository.py writes all three tables);
-- the three tables are partitioned by time so that dropping
-- old data is dropping a partition (registry_usage_partitions_v1). Rows are the tenant's (row-level
-- security); workers write them as the owner role, which crosses tenants.
DO $$
DECLARE
    tbl text;
BEGIN
    FOREACH tbl IN ARRAY ARRAY['usage_minutes', 'usage_hours', 'usage_days'] LOOP
        EXECUTE format(
            'CREATE TABLE %I (
                 tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
                 kind text NOT NULL,
                 name text NOT NULL,
                 at timestamptz NOT NULL,
                 version integer NOT NULL,
                 label text NOT NULL,
                 surface text NOT NULL,
                 caller text NOT NULL,
                 client text NOT NULL,
                 answers bigint NOT NULL,
                 first_at timestamptz NOT NULL,
                 last_at timestamptz NOT NULL,
                 PRIMARY KEY (tenant_id, kind, name, at, version, label, surface, caller, client)
             ) PARTITION BY RANGE (at)', tbl);
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tbl);
        EXECUTE format(
            'CREATE POLICY tenant_isolation_v1 ON %I
                 USING (tenant_id = registry_current_tenant_v1())
                 WITH CHECK (tenant_id = registry_current_tenant_v1())', tbl);
        -- Readers only: counts are written by the workers (owner role), never by a request.
        EXECUTE format('GRANT SELECT ON %I TO registry_app', tbl);
    END LOOP;
END
$$;

-- How long a tenant keeps its ledger (days); the deployment keeps minutes and hours shorter.
ALTER TABLE tenants ADD COLUMN usage_retention_days integer NOT NULL DEFAULT 90
    CONSTRAINT usage_retention_days_range CHECK (usage_retention_days BETWEEN 1 AND 3650);

-- The partitions around ``moment`` made (minutes: a UTC day each, from yesterday to two days ahead;
-- hours and days: a UTC month each, the last, this one and the next), and those wholly older than what is
-- kept dropped: minutes after ``minute_days``, hours after ``hour_days``, days after the longest
-- retention any tenant chose. A tenant that keeps less loses its older rows by a delete. One caller
-- at a time (every worker runs it at start and each hour).
CREATE FUNCTION registry_usage_partitions_v1(moment timestamptz, minute_days integer, hour_days integer)
    RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    today date := (moment AT TIME ZONE 'UTC')::date;
    month date := date_trunc('month', moment AT TIME ZONE 'UTC')::date;
    d date;
    part record;
    upper date;
    longest integer;
    dropped integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('registry_usage_partitions_v1'));
    FOR d IN SELECT generate_series(today - 1, today + 2, interval '1 day')::date LOOP
        EXECUTE format(
            'CREATE TABLE IF NOT EXISTS %I PARTITION OF usage_minutes FOR VALUES FROM (%L) TO (%L)',
            'usage_minutes_' || to_char(d, 'YYYYMMDD'),
            d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
    SELECT coalesce(max(usage_retention_days), 90) INTO longest FROM tenants;
    FOREACH d IN ARRAY ARRAY[(month - interval '1 month')::date, month, (month + interval '1 month')::date] LOOP
        upper := (d + interval '1 month')::date;
        IF upper > today - least(hour_days, longest) THEN  -- not one the loop below would drop
            EXECUTE format(
                'CREATE TABLE IF NOT EXISTS %I PARTITION OF usage_hours FOR VALUES FROM (%L) TO (%L)',
                'usage_hours_' || to_char(d, 'YYYYMM'),
                d::timestamp AT TIME ZONE 'UTC', upper::timestamp AT TIME ZONE 'UTC');
        END IF;
        IF upper > today - longest THEN
            EXECUTE format(
                'CREATE TABLE IF NOT EXISTS %I PARTITION OF usage_days FOR VALUES FROM (%L) TO (%L)',
                'usage_days_' || to_char(d, 'YYYYMM'),
                d::timestamp AT TIME ZONE 'UTC', upper::timestamp AT TIME ZONE 'UTC');
        END IF;
    END LOOP;
    FOR part IN
        SELECT c.relname, p.relname AS parent
          FROM pg_inherits i
          JOIN pg_class c ON c.oid = i.inhrelid
          JOIN pg_class p ON p.oid = i.inhparent
         WHERE p.relname IN ('usage_minutes', 'usage_hours', 'usage_days')
    LOOP
        IF part.parent = 'usage_minutes' THEN
            upper := to_date(right(part.relname, 8), 'YYYYMMDD') + 1;
            CONTINUE WHEN upper > today - minute_days;
        ELSE
            upper := (to_date(right(part.relname, 6), 'YYYYMM') + interval '1 month')::date;
            CONTINUE WHEN upper > today - CASE part.parent WHEN 'usage_hours'
                                              THEN least(hour_days, longest) ELSE longest END;
        END IF;
        EXECUTE format('DROP TABLE %I', part.relname);
        dropped := dropped + 1;
    END LOOP;
    -- Only the tenants that keep less than the longest (their rows alone are read: the key leads
    -- with the tenant).
    DELETE FROM usage_days u USING tenants t
     WHERE u.tenant_id = t.id AND t.usage_retention_days < longest
       AND u.at < moment - make_interval(days => t.usage_retention_days);
    DELETE FROM usage_hours u USING tenants t
     WHERE u.tenant_id = t.id AND t.usage_retention_days < least(hour_days, longest)
       AND u.at < moment - make_interval(days => t.usage_retention_days);
    RETURN dropped;
END
$$;

-- The first partitions, so that a worker's first flush has somewhere to go.
SELECT registry_usage_partitions_v1(now(), 2, 35);
