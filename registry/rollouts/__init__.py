"""Progressive delivery: a rollout of a label serves a new version to a share of callers, sticky
per caller, in steps, until it is promoted or rolled back."""
