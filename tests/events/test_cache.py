"""The in-process caches stay within their bounds, whatever their capacity counts."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from registry.events.cache import MISSING, Grouped, TenantScoped


def test_a_tenant_keeps_no_more_keys_than_the_cache_holds() -> None:
    """A cache weighed in bytes holds few entries; the keys a tenant remembers for invalidation
    must not grow with every key ever put (new arguments in every prompts/get, say)."""
    cache: TenantScoped[bytes] = TenantScoped("test", 10_000, weigh=len)
    tenant = uuid.uuid4()
    for i in range(15_000):
        cache.put(tenant, f"key-{i}", b"x" * 500, cache.generation(tenant))
    held = len(cache.lru)
    assert held == 20  # 10,000 bytes of 500-byte values
    assert len(cache._keys[tenant.int]) <= 2 * held + 64 + 1
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
    assert (cache.held(other), cache.held(churner), len(cache.lru)) == (20, 80, 100)
    assert cache.get(churner, "new-9999") == b"x" and cache.get(churner, "new-9919") is MISSING
    # Within its share, the other tenant's puts evict the least recently used entry, whoever's.
    for i in range(5):
        cache.put(other, f"more-{i}", b"x", cache.generation(other))
    assert (cache.held(other), cache.held(churner)) == (25, 75)


def test_a_cache_whose_keys_do_not_name_their_tenant_gives_each_its_share_too() -> None:
    """The answers sent again from their bytes, the tenants by slug, the checked credentials: one
    tenant's churn leaves the others' entries, and a key kept again by another tenant is the other
    tenant's from then on (its first tenant's notification no longer drops it)."""
    cache: Grouped[bytes] = Grouped("test", 100, share=0.25)
    churner, other = uuid.uuid4(), uuid.uuid4()
    for i in range(20):
        cache.keep(other, f"kept-{i}", b"x")
    for i in range(10_000):
        cache.keep(churner, f"new-{i}", b"x")
    assert all(cache.lru.peek(f"kept-{i}") == b"x" for i in range(20))
    assert (cache.held(other), cache.held(churner)) == (20, 80)
    cache.keep(churner, "kept-0", b"y")  # in the place of the other tenant's entry: no eviction
    assert (cache.held(other), cache.held(churner)) == (19, 81)
    cache.invalidate(other)
    assert cache.lru.peek("kept-0") == b"y" and cache.lru.peek("kept-1") is MISSING
    assert (cache.held(other), cache.held(churner)) == (0, 81)


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
@given(
    operations=st.lists(OPERATION, max_size=200),
    share=st.sampled_from([0.25, 0.5, 1.0]),
    grouped=st.booleans(),
)
def test_what_each_tenant_holds_is_the_weight_of_its_entries(
    operations: list[tuple[str, int, int, int]], share: float, grouped: bool
) -> None:
    """Whatever is put, read, replaced, evicted or invalidated (and, in a cache whose keys do not
    name their tenant, kept again by another tenant), the cache stays within its capacity, the
    weight it counts for each tenant is that of the tenant's entries it holds, and a tenant's
    invalidation drops its entries only."""
    cache: TenantScoped[bytes] | Grouped[bytes] = (
        Grouped("test", 100, weigh=len, share=share)
        if grouped
        else TenantScoped("test", 100, weigh=len, share=share)
    )
    tenants = [uuid.UUID(int=n + 1) for n in range(3)]

    def owner(key: Any) -> int:
        return cache._owners[key] if isinstance(cache, Grouped) else int(key[0])

    for operation, n, key, weight in operations:
        tenant = tenants[n]
        if operation == "put":
            if isinstance(cache, Grouped):
                cache.keep(tenant, key, b"x" * weight)
                assert cache.lru.peek(key) == b"x" * weight  # just kept: never its own victim
            else:
                cache.put(tenant, key, b"x" * weight, cache.generation(tenant))
                assert cache.get(tenant, key) == b"x" * weight
        elif operation == "get":
            cache.lru.get(key if isinstance(cache, Grouped) else (tenant.int, key))
        else:
            others = {k: v for k, (v, _) in cache.lru._items.items() if owner(k) != tenant.int}
            cache.invalidate(tenant)
            assert cache.held(tenant) == 0
            assert others == {k: v for k, (v, _) in cache.lru._items.items()}
        assert cache.lru.weight <= 100
        for t in tenants:
            held = [len(v) for k, (v, _) in cache.lru._items.items() if owner(k) == t.int]
            assert cache.held(t) == sum(held)
