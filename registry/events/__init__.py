"""Change fan-out: the LISTEN connection, the per-tenant hub and cache invalidation."""
