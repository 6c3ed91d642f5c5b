-- Progressive delivery (issue 70): a rollout of a label serves a new version to a share of callers
-- (chosen by a hash of the rollout's salt and the caller, so sticky across workers and instances)
-- while the label itself stays on the old one, in steps, until it is promoted (the label moves) or
-- rolled back. One live rollout (running or paused) per label of a prompt or skill.
CREATE TABLE rollouts (
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id bigint GENERATED ALWAYS AS IDENTITY,
    kind text NOT NULL CONSTRAINT rollout_kind CHECK (kind IN ('prompt', 'skill')),
    name text NOT NULL,
    label text NOT NULL,
    from_version integer NOT NULL,
    to_version integer NOT NULL,
    steps integer[] NOT NULL,
    step integer NOT NULL DEFAULT 0,
    min_answers integer NOT NULL DEFAULT 0,
    min_seconds integer NOT NULL DEFAULT 0,
    min_outcomes integer NOT NULL DEFAULT 0,
    state text NOT NULL DEFAULT 'running'
        CONSTRAINT rollout_state CHECK (state IN ('running', 'paused', 'promoted', 'rolled_back')),
    salt bytea NOT NULL,
    step_started_at timestamptz NOT NULL DEFAULT now(),
    reason text,
    started_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_rollouts PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX ix_rollouts_live ON rollouts (tenant_id, kind, name, label)
    WHERE state IN ('running', 'paused');
-- The scheduler finds the running ones across tenants (few: the partial index is small; it leads
-- with the tenant, as every index here does, for distribution by tenant).
CREATE INDEX ix_rollouts_running ON rollouts (tenant_id, step_started_at) WHERE state = 'running';
ALTER TABLE rollouts ENABLE ROW LEVEL SECURITY;
ALTER TABLE rollouts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON rollouts
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT, UPDATE ON rollouts TO registry_app;

-- What callers reported of answers a rollout decided (POST /feedback): one report per answer (the
-- digest of its receipt's signature), the step and side the receipt names, and the served caller's
-- digest it names too (a caller counts at most a few times a step: registry.rollouts.feedback).
CREATE TABLE rollout_feedback (
    tenant_id uuid NOT NULL,
    rollout_id bigint NOT NULL,
    receipt bytea NOT NULL,
    caller text NOT NULL,
    step integer NOT NULL,
    side text NOT NULL CONSTRAINT feedback_side CHECK (side IN ('old', 'new')),
    good boolean NOT NULL,
    score real,
    reported_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_rollout_feedback PRIMARY KEY (tenant_id, rollout_id, receipt),
    CONSTRAINT fk_rollout_feedback_rollout FOREIGN KEY (tenant_id, rollout_id)
        REFERENCES rollouts (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX ix_rollout_feedback_step ON rollout_feedback (tenant_id, rollout_id, step, caller);
ALTER TABLE rollout_feedback ENABLE ROW LEVEL SECURITY;
ALTER TABLE rollout_feedback FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation_v1 ON rollout_feedback
    USING (tenant_id = registry_current_tenant_v1())
    WITH CHECK (tenant_id = registry_current_tenant_v1());
GRANT SELECT, INSERT ON rollout_feedback TO registry_app;

-- How many live rollouts the tenant has: serving looks for them only when there are some (the
-- tenant's row is read with every request anyway).
ALTER TABLE tenants ADD COLUMN rollouts_live integer NOT NULL DEFAULT 0;
