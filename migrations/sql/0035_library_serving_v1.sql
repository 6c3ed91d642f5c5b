-- Serving a library's prompts to its subscribers (issue 71), each read one statement on the hot
-- path's plain pool, as registry_served_version_v3 is: the application role, and the tenant set
-- for the statement's own transaction. A read enters the subscriber first and asks
-- registry_library_grant_v1 (both consents, under the subscriber's row-level security); only
-- with a grant does it enter the library, and then reads only what the granted label serves
-- (following) or the pinned versions that label has served (pinning): never a draft, another
-- label, a key, the audit log or the usage of the library. Each leaves the subscriber set again
-- before it returns, so that it is as safe inside a subscriber's transaction as on its own.

-- The libraries a tenant reads now (both consents hold), with its subscription's terms.
CREATE FUNCTION registry_library_reads_v1(p_tenant uuid)
    RETURNS TABLE (library_id uuid, library text, label text, follow boolean, pins jsonb,
                   prefix text)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    RETURN QUERY
        SELECT s.library_id, t.slug, s.label, s.follow, s.pins, s.prefix
          FROM library_subscriptions s
          JOIN tenants t ON t.id = s.library_id
         WHERE s.tenant_id = p_tenant
           AND registry_library_grant_v1(s.library_id) IS NOT NULL
         ORDER BY t.slug;
END
$$;

-- Whether a pinned version is one the granted label has served (now or before): a pin never
-- reaches a version the library did not publish on that label.
CREATE FUNCTION registry_library_published_v1(p_library uuid, p_prompt uuid, p_label text,
                                              p_version integer)
    RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT EXISTS (SELECT 1 FROM labels l
                    WHERE l.tenant_id = p_library AND l.prompt_id = p_prompt
                      AND l.label = p_label AND l.version = p_version)
        OR EXISTS (SELECT 1 FROM label_history h
                    WHERE h.tenant_id = p_library AND h.prompt_id = p_prompt
                      AND h.label = p_label AND h.to_version = p_version)
$$;

-- One keyset page of what a library serves a subscriber, by name: (name, version, its stored
-- list entry). Nothing when the grant does not hold.
CREATE FUNCTION registry_library_entries_v1(p_tenant uuid, p_library uuid, p_after text,
                                            p_limit integer)
    RETURNS TABLE (name text, version integer, entry text)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_label text;
    v_follow boolean;
    v_pins jsonb;
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    v_label := registry_library_grant_v1(p_library);
    IF v_label IS NULL THEN
        RETURN;
    END IF;
    SELECT s.follow, s.pins INTO v_follow, v_pins
      FROM library_subscriptions s WHERE s.tenant_id = p_tenant AND s.library_id = p_library;
    PERFORM set_config('registry.tenant_id', p_library::text, true);
    IF v_follow THEN
        RETURN QUERY
            SELECT l.prompt_name, l.version, l.list_entry
              FROM labels l
             WHERE l.tenant_id = p_library AND l.label = v_label
               AND l.prompt_name > coalesce(p_after, '') AND NOT l.archived
             ORDER BY l.prompt_name
             LIMIT p_limit;
    ELSE
        RETURN QUERY
            SELECT p.name, v.version, v.list_entry
              FROM jsonb_each_text(v_pins) pin (name, version)
              JOIN prompts p ON p.tenant_id = p_library AND p.name = pin.name
              JOIN prompt_versions v ON v.tenant_id = p_library AND v.prompt_id = p.id
                                    AND v.version = pin.version::integer
             WHERE pin.name > coalesce(p_after, '') AND p.archived_at IS NULL
               AND registry_library_published_v1(p_library, p.id, v_label, v.version)
             ORDER BY p.name
             LIMIT p_limit;
    END IF;
    PERFORM set_config('registry.tenant_id', p_tenant::text, true);
END
$$;

-- How many prompts a library serves a subscriber (what a first page's size is chosen by).
CREATE FUNCTION registry_library_count_v1(p_tenant uuid, p_library uuid)
    RETURNS bigint
    LANGUAGE sql
    AS $$
    SELECT count(*) FROM registry_library_entries_v1(p_tenant, p_library, NULL, 2147483647)
$$;

-- The version of ``p_name`` a library serves a subscriber, as registry_served_version_v3 answers
-- it (``{"missing": "library"}`` without a grant, ``"prompt"`` when it serves no such prompt).
CREATE FUNCTION registry_library_served_version_v1(p_tenant uuid, p_library uuid, p_name text)
    RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_label text;
    v_follow boolean;
    v_pins jsonb;
    v_version integer;
    v_prompt uuid;
    v_found jsonb;
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    v_label := registry_library_grant_v1(p_library);
    IF v_label IS NULL THEN
        RETURN jsonb_build_object('missing', 'library');
    END IF;
    SELECT s.follow, s.pins INTO v_follow, v_pins
      FROM library_subscriptions s WHERE s.tenant_id = p_tenant AND s.library_id = p_library;
    IF v_follow THEN
        v_found := registry_served_version_v3(p_library, p_name, v_label, NULL);
    ELSIF NOT v_pins ? p_name THEN
        v_found := jsonb_build_object('missing', 'prompt');
    ELSE
        v_version := (v_pins ->> p_name)::integer;
        PERFORM set_config('registry.tenant_id', p_library::text, true);
        SELECT p.id INTO v_prompt FROM prompts p
         WHERE p.tenant_id = p_library AND p.name = p_name AND p.archived_at IS NULL;
        IF v_prompt IS NULL OR NOT registry_library_published_v1(p_library, v_prompt, v_label,
                                                                  v_version) THEN
            v_found := jsonb_build_object('missing', 'prompt');
        ELSE
            v_found := registry_served_version_v3(p_library, p_name, v_label, v_version);
        END IF;
    END IF;
    PERFORM set_config('registry.tenant_id', p_tenant::text, true);
    RETURN v_found;
END
$$;

-- The tenants that read a library now (both consents hold), and whether each follows its label:
-- whom a worker tells when the library changes. Read as the library, through the policy that
-- shows it the subscriptions made to it.
CREATE FUNCTION registry_library_subscribers_v1(p_library uuid)
    RETURNS TABLE (tenant_id uuid, follow boolean)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_library::text, true);
    RETURN QUERY
        SELECT s.tenant_id, s.follow
          FROM library_subscriptions s
         WHERE s.library_id = p_library
           AND s.label = (SELECT o.label FROM library_offers o
                           WHERE o.tenant_id = p_library
                             AND (o.subscriber_id = s.tenant_id OR o.subscriber_id IS NULL)
                           ORDER BY o.subscriber_id NULLS LAST LIMIT 1)
         ORDER BY s.tenant_id;
END
$$;

-- Either side's consent changed: every worker forgets whom the library's changes reach and drops
-- what its subscribers' caches hold (one notification, named by the library).
CREATE FUNCTION registry_library_notify_v1()
    RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_library uuid;
BEGIN
    IF TG_TABLE_NAME = 'library_offers' THEN
        v_library := coalesce(NEW.tenant_id, OLD.tenant_id);
    ELSE
        v_library := coalesce(NEW.library_id, OLD.library_id);
    END IF;
    PERFORM pg_notify('registry_changes',
                      json_build_object('tenant', v_library, 'library', true)::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER library_offers_notify_v1 AFTER INSERT OR UPDATE OR DELETE ON library_offers
    FOR EACH ROW EXECUTE FUNCTION registry_library_notify_v1();
CREATE TRIGGER library_subscriptions_notify_v1
    AFTER INSERT OR UPDATE OR DELETE ON library_subscriptions
    FOR EACH ROW EXECUTE FUNCTION registry_library_notify_v1();

-- What a worker asks of a tenant before it reads anything of libraries: whether it offers any
-- (its changes then reach its subscribers) and whether it reads any (its lists then merge them).
-- Kept by the triggers below with every offer and subscription made or ended.
ALTER TABLE tenants ADD COLUMN library_offers integer NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN library_reads integer NOT NULL DEFAULT 0;
UPDATE tenants t SET library_offers = (SELECT count(*) FROM library_offers o
                                        WHERE o.tenant_id = t.id);
UPDATE tenants t SET library_reads = (SELECT count(*) FROM library_subscriptions s
                                       WHERE s.tenant_id = t.id);

CREATE FUNCTION registry_library_counts_v1()
    RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_step integer := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
    v_tenant uuid := CASE TG_OP WHEN 'INSERT' THEN NEW.tenant_id ELSE OLD.tenant_id END;
BEGIN
    IF TG_TABLE_NAME = 'library_offers' THEN
        UPDATE tenants SET library_offers = library_offers + v_step WHERE id = v_tenant;
    ELSE
        UPDATE tenants SET library_reads = library_reads + v_step WHERE id = v_tenant;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER library_offers_count_v1 AFTER INSERT OR DELETE ON library_offers
    FOR EACH ROW EXECUTE FUNCTION registry_library_counts_v1();
CREATE TRIGGER library_subscriptions_count_v1 AFTER INSERT OR DELETE ON library_subscriptions
    FOR EACH ROW EXECUTE FUNCTION registry_library_counts_v1();

-- Every tenant that subscribed to a library, whether the offer still holds or not: whose caches a
-- worker drops when either side's consent changes (a withdrawn offer leaves the subscription).
CREATE FUNCTION registry_library_subscriptions_v1(p_library uuid)
    RETURNS TABLE (tenant_id uuid)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_library::text, true);
    RETURN QUERY SELECT s.tenant_id FROM library_subscriptions s WHERE s.library_id = p_library;
END
$$;

-- The bytes of blobs a library's served version uses (by digest, as its record names them), for
-- a subscriber it grants: what rendering a library's prompt with an image or audio needs.
CREATE FUNCTION registry_library_blobs_v1(p_tenant uuid, p_library uuid, p_shas bytea[])
    RETURNS TABLE (sha256 bytea, mime_type text, data bytea)
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    IF registry_library_grant_v1(p_library) IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('registry.tenant_id', p_library::text, true);
    RETURN QUERY SELECT b.sha256, b.mime_type, b.data FROM blobs b
                  WHERE b.tenant_id = p_library AND b.sha256 = ANY (p_shas);
    PERFORM set_config('registry.tenant_id', p_tenant::text, true);
END
$$;

-- The skills a library serves a subscriber, by name after ``p_after`` (or the one named
-- ``p_name``): following, what the granted label serves; pinning, a pinned skill while the label
-- serves that version (skill labels keep no history, so a pin reaches no version the label has
-- left). Each with its front matter and its files' manifest (path, sha256, size, media type).
CREATE FUNCTION registry_library_skills_v1(p_tenant uuid, p_library uuid, p_after text,
                                           p_name text, p_limit integer)
    RETURNS TABLE (name text, version integer, description text, frontmatter jsonb, files jsonb)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_label text;
    v_follow boolean;
    v_pins jsonb;
BEGIN
    PERFORM set_config('role', 'registry_app', true),
            set_config('registry.tenant_id', p_tenant::text, true);
    v_label := registry_library_grant_v1(p_library);
    IF v_label IS NULL THEN
        RETURN;
    END IF;
    SELECT s.follow, s.pins INTO v_follow, v_pins
      FROM library_subscriptions s WHERE s.tenant_id = p_tenant AND s.library_id = p_library;
    PERFORM set_config('registry.tenant_id', p_library::text, true);
    RETURN QUERY
        SELECT l.skill_name, l.version, v.description, v.frontmatter,
               (SELECT jsonb_agg(jsonb_build_object('path', f.path,
                                                    'sha256', encode(f.sha256, 'hex'),
                                                    'size', f.size, 'mime_type', f.mime_type)
                                 ORDER BY f.path)
                  FROM skill_files f
                 WHERE f.tenant_id = p_library AND f.skill_id = l.skill_id
                   AND f.version = l.version)
          FROM skill_labels l
          JOIN skills k ON k.tenant_id = l.tenant_id AND k.id = l.skill_id
          JOIN skill_versions v ON v.tenant_id = l.tenant_id AND v.skill_id = l.skill_id
                               AND v.version = l.version
         WHERE l.tenant_id = p_library AND l.label = v_label AND k.archived_at IS NULL
           AND l.skill_name > coalesce(p_after, '')
           AND (p_name IS NULL OR l.skill_name = p_name)
           AND (v_follow OR (v_pins ->> l.skill_name) = l.version::text)
         ORDER BY l.skill_name
         LIMIT p_limit;
    PERFORM set_config('registry.tenant_id', p_tenant::text, true);
END
$$;
