"""Webhooks: endpoints a tenant admin registers, the outbox a trigger fills in each change's own
transaction, and the dispatcher that delivers it (Standard Webhooks signatures, retries, a log)."""
