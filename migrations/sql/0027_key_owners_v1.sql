-- Who holds a key (a person's name or email): approvals of change requests count people, not
-- credentials, so two keys of one owner approve once, and an author's second key never approves
-- their own request. Nullable: keys made before stay as they were (each counts as its own person).
ALTER TABLE api_keys ADD COLUMN owner text;
ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_owner_length
    CHECK (owner IS NULL OR char_length(owner) BETWEEN 1 AND 200);

-- Every public key the registry has signed with, so receipts, skill entries and snapshots signed
-- before a rotation still verify: published at /.well-known/prompt-registry/signing-keys. Public
-- keys only (never a private key); not a tenant's, so no row-level security.
CREATE TABLE signing_keys (
    key_id text PRIMARY KEY,
    public_key text NOT NULL,
    first_used timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON signing_keys TO registry_app;
