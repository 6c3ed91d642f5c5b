"""The in-process caches stay within their bounds, whatever their capacity counts."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_one_tenants_churn_never_pushes_out_what_another_tenant_is_served_from() -> None:
    """A full cache: a tenant holding more than its share makes room from its own entries, so a
    tenant putting a new key in every request (new arguments, made-up names) cannot evict another
    tenant's entries, while the room it leaves is still used."""
    cache: TenantScoped[bytes] = TenantScoped("test", 100, share=0.25)
    churner, other = uuid.uuid4(), uuid.uuid4()
    for i in range(20):
        cache.put(other, f"kept-{i}", b"x", cache.generation(other))
    for i in range(10_000):
        cache.put(churner, f"new-{i}", b"x", cache.generation(churner))
    assert all(cache.get(other, f"kept-{i}") == b"x" for i in range(20))
    assert (cache.held(other), cache.held(churner), len(cache._lru)) == (20, 80, 100)
    assert cache.get(churner, "new-9999") == b"x" and cache.get(churner, "new-9919") is MISSING
    # Within its share, the other tenant's puts evict the least recently used entry, whoever's.
    for i in range(5):
        cache.put(other, f"more-{i}", b"x", cache.generation(other))
    assert (cache.held(other), cache.held(churner)) == (25, 75)


def test_a_tenant_alone_in_the_cache_evicts_the_least_recently_used_first() -> None:
    cache: TenantScoped[bytes] = TenantScoped("test", 100, share=0.25)
    tenant = uuid.uuid4()
    for i in range(100):
        cache.put(tenant, i, b"x", cache.generation(tenant))
    assert cache.get(tenant, 0) == b"x"  # read again: the most recently used now
    cache.put(tenant, 100, b"x", cache.generation(tenant))
    assert cache.get(tenant, 0) == b"x" and cache.get(tenant, 1) is MISSING
    assert cache.held(tenant) == 100


OPERATION = st.tuples(
    st.sampled_from(["put", "put", "put", "get", "invalidate"]),
    st.integers(0, 2),  # the tenant
    st.integers(0, 30),  # the key
    st.integers(1, 40),  # the value's weight
)


@settings(max_examples=300, deadline=None)
@given(operations=st.lists(OPERATION, max_size=200), share=st.sampled_from([0.25, 0.5, 1.0]))
def test_what_each_tenant_holds_is_the_weight_of_its_entries(
    operations: list[tuple[str, int, int, int]], share: float
) -> None:
    """Whatever is put, read, replaced, evicted or invalidated, the cache stays within its
    capacity and the weight it counts for each tenant is that of the tenant's entries it holds."""
    cache: TenantScoped[bytes] = TenantScoped("test", 100, weigh=len, share=share)
    tenants = [uuid.UUID(int=n + 1) for n in range(3)]
    for operation, n, key, weight in operations:
        tenant = tenants[n]
        if operation == "put":
            cache.put(tenant, key, b"x" * weight, cache.generation(tenant))
            assert cache.get(tenant, key) == b"x" * weight  # just put: never its own victim
        elif operation == "get":
            cache.get(tenant, key)
        else:
            cache.invalidate(tenant)
            assert cache.held(tenant) == 0
        assert cache._lru.weight <= 100
        for t in tenants:
            held = [len(v) for key, (v, _) in cache._lru._items.items() if key[0] == t.int]  # type: ignore[index]
            assert cache.held(t) == sum(held)
