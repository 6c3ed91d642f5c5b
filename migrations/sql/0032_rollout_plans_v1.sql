-- Rollouts through change requests, and the registry's own signals per side (issue 70).
-- A change request's move may carry a rollout plan (steps and gates): applying the request starts
-- the rollout instead of moving the label, and the rollout remembers the request that approved it
-- (its steps and its promotion need no further approval). The serve ledger counts, beside the
-- answers, the requests a rollout routed that ended in an error (argument errors and refusals).
-- Expand only: nullable columns and columns with a constant default (no table rewrite).
ALTER TABLE change_request_moves ADD COLUMN rollout jsonb;
ALTER TABLE rollouts ADD COLUMN change_request_id bigint;
ALTER TABLE usage_minutes ADD COLUMN errors bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_hours ADD COLUMN errors bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_days ADD COLUMN errors bigint NOT NULL DEFAULT 0;
