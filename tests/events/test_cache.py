"""The in-process caches stay within their bounds, whatever their capacity counts."""

from __future__ import annotations

import uuid

from registry.events.cache import MISSING, TenantScoped


def test_a_tenant_keeps_no_more_keys_than_the_cache_holds() -> None:
    """A cache weighed in bytes holds few entries; the keys a tenant remembers for invalidation
    must not grow with every key ever put (new arguments in every prompts/get, say)."""
    cache: TenantScoped[bytes] = TenantScoped("test", 10_000, weigh=len)
    tenant = uuid.uuid4()
    for i in range(15_000):
        cache.put(tenant, f"key-{i}", b"x" * 500, cache.generation(tenant))
    held = len(cache._lru)
    assert held == 20  # 10,000 bytes of 500-byte values
    assert len(cache._keys[tenant]) <= 2 * held + 64 + 1
    assert cache.get(tenant, "key-14999") == b"x" * 500
    cache.invalidate(tenant)
    assert cache.get(tenant, "key-14999") is MISSING
