"""In-process caches: immutable entries (versions never change) and tenant-scoped entries dropped when
the tenant's change notification arrives. Both are bounded LRUs that count hits and misses."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from registry import collector
from registry.metrics import CACHE_HITS, CACHE_MISSES, tally

V = TypeVar("V")
MISSING: Any = object()


class Lru(Generic[V]):
    """A bounded LRU map; ``weigh`` lets large values (blobs) count for their size."""

    def __init__(
        self,
        name: str,
        capacity: int,
        weigh: Any = None,
        dropped: Callable[[Hashable, int], None] | None = None,
    ) -> None:
        """``dropped(key, weight)`` hears of every entry that leaves but through ``clear``: evicted,
        popped or replaced. The worker's collector policy hears of those that leave to make room
        for another or are replaced (``collector.dropped``): a cache turning over."""
        self.name = name
        self.capacity = capacity
        self.weigh = weigh or (lambda value: 1)
        self.weight = 0
        self.dropped = dropped or (lambda key, weight: None)
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._hits = tally(CACHE_HITS, name)
        self._misses = tally(CACHE_MISSES, name)

    def get(self, key: Hashable) -> V:
        found = self._items.get(key)
        if found is None:
            self._misses.inc()
            return MISSING  # type: ignore[no-any-return]
        self._items.move_to_end(key)
        self._hits.inc()
        return found[0]

    def peek(self, key: Hashable) -> V:
        """The value (or MISSING) without counting a hit or a miss or refreshing its place."""
        found = self._items.get(key)
        return MISSING if found is None else found[0]

    def put(self, key: Hashable, value: V, weight: int | None = None) -> V:
        """Keep ``value`` (``weight``: what ``weigh`` says of it, when the caller has asked)."""
        weight = int(self.weigh(value)) if weight is None else weight
        if weight > self.capacity:
            return value  # too big to keep: serve it, don't cache it
        self.pop(key)
        self._items[key] = (value, weight)
        self.weight += weight
        while self.weight > self.capacity:
            evicted, (_, dropped) = self._items.popitem(last=False)
            self.weight -= dropped
            self.dropped(evicted, dropped)
            collector.dropped()
        return value

    def pop(self, key: Hashable, *, turnover: bool = True) -> None:
        """Drop ``key``'s entry. ``turnover`` False: not to make room for another (an
        invalidation), which the collector policy does not count (``collector.dropped``)."""
        old = self._items.pop(key, None)
        if old is not None:
            self.weight -= old[1]
            self.dropped(key, old[1])
            if turnover:
                collector.dropped()

    def clear(self) -> None:
        self._items.clear()
        self.weight = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items


# The share of a full cache a tenant may hold before what it puts evicts its own entries first,
# and no other tenant's: one tenant's churn (new arguments, names or labels in every request) cannot
# push out what every other tenant is served from. While the cache has room, any tenant fills it.
FAIR_SHARE = 0.25


class _Shared(Generic[V]):
    """A bounded LRU whose entries each belong to a tenant: each tenant's keys are remembered in
    the order they were put (so that its notification drops them), with the weight it holds.

    When the cache is full, a tenant holding more than ``share`` of it while other tenants hold
    the rest makes room from its own entries, the longest kept first; any other put evicts the
    least recently used entry, whoever's it is (a tenant alone in the cache: plain LRU).
    """

    def __init__(self, name: str, capacity: int, weigh: Any, share: float) -> None:
        self.lru: Lru[V] = Lru(name, capacity, weigh, dropped=self._dropped)
        # By the tenant's int: its keys of the LRU in put order, and the weight of its entries.
        self._keys: dict[int, OrderedDict[Hashable, None]] = {}
        self._held: dict[int, int] = {}
        self._share = int(capacity * share)

    def _owner(self, key: Hashable) -> int:
        """The tenant whose entry ``key`` is, as the entry leaves the LRU."""
        raise NotImplementedError

    def _owns(self, tenant: int, key: Hashable) -> bool:
        """Whether ``key``, remembered among the tenant's keys, is still the tenant's entry."""
        return key in self.lru

    def _claim(self, tenant: int, key: Hashable) -> None:
        """``key`` is the tenant's entry from now on."""

    def _dropped(self, key: Hashable, weight: int) -> None:
        tenant = self._owner(key)
        left = self._held[tenant] - weight
        if left:
            self._held[tenant] = left
        else:
            del self._held[tenant]

    def _keep(self, tenant: int, key: Hashable, value: V) -> V:
        lru = self.lru
        weight = int(lru.weigh(value))
        if weight > lru.capacity:
            return value  # too big to keep (Lru.put would not keep it either)
        keys = self._keys.get(tenant)
        if keys is None:
            keys = self._keys[tenant] = OrderedDict()
        keys.pop(key, None)
        lru.pop(key)
        held = self._held.get(tenant, 0)
        if lru.weight + weight > lru.capacity and held + weight > self._share and held < lru.weight:
            self._make_room(tenant, keys, weight)
        # Forget keys the LRU already evicted once they outnumber what it holds (its capacity may
        # be bytes, not entries): a tenant's keys stay within about twice the cache's entries.
        if len(keys) > 2 * len(lru) + 64:
            keys = self._keys[tenant] = OrderedDict(
                (k, None) for k in keys if self._owns(tenant, k)
            )
        keys[key] = None
        self._held[tenant] = self._held.get(tenant, 0) + weight
        self._claim(tenant, key)
        return lru.put(key, value, weight)

    def _make_room(self, tenant: int, keys: OrderedDict[Hashable, None], weight: int) -> None:
        """Drop the tenant's own entries, the longest kept first, until ``weight`` more fits."""
        lru = self.lru
        while keys and lru.weight + weight > lru.capacity:
            oldest, _ = keys.popitem(last=False)
            if self._owns(tenant, oldest):
                lru.pop(oldest)

    def _forget(self, tenant: int) -> None:
        """Drop every entry of the tenant (not counted as turnover: what is put afterwards counts up
        the interpreter's allocations from where these frees left them, as a filling cache does)."""
        for key in self._keys.pop(tenant, ()):
            if self._owns(tenant, key):
                self.lru.pop(key, turnover=False)

    def held(self, tenant_id: uuid.UUID) -> int:
        """The weight of the tenant's entries the cache holds."""
        return self._held.get(tenant_id.int, 0)

    def clear(self) -> None:
        self.lru.clear()
        self._keys.clear()
        self._held.clear()


class TenantScoped(_Shared[V]):
    """Entries grouped by tenant, so one notification drops everything a tenant's change may touch
    (a fair share each when the cache is full: ``_Shared``).

    Keys hold the tenant as an int, not a UUID object: a tuple of plain values is not tracked by the
    cycle collector, and with hundreds of thousands of entries that keeps its full passes short.

    A reader takes ``generation(tenant)`` before it reads the database and hands it to ``put``; if an
    invalidation came in between, the value may predate the change and is not kept.
    """

    def __init__(
        self, name: str, capacity: int, weigh: Any = None, share: float = FAIR_SHARE
    ) -> None:
        super().__init__(name, capacity, weigh, share)
        self._generations: dict[uuid.UUID, int] = {}
        self._epoch = 0  # bumped by clear(), so every generation taken before it is outdated

    def _owner(self, key: Hashable) -> int:
        return key[0]  # type: ignore[index,no-any-return]

    def generation(self, tenant_id: uuid.UUID) -> tuple[int, int]:
        return self._epoch, self._generations.get(tenant_id, 0)

    def get(self, tenant_id: uuid.UUID, key: Hashable) -> V:
        return self.lru.get((tenant_id.int, key))

    def peek(self, tenant_id: uuid.UUID, key: Hashable) -> V:
        return self.lru.peek((tenant_id.int, key))

    def put(self, tenant_id: uuid.UUID, key: Hashable, value: V, generation: tuple[int, int]) -> V:
        if generation != self.generation(tenant_id):
            return value
        return self.keep(tenant_id, key, value)

    def keep(self, tenant_id: uuid.UUID, key: Hashable, value: V) -> V:
        """``put`` without a generation to check: for entries that never change (compiled versions,
        blobs), which no notification drops."""
        return self._keep(tenant_id.int, (tenant_id.int, key), value)

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        self._generations[tenant_id] = self._generations.get(tenant_id, 0) + 1
        self._forget(tenant_id.int)

    def clear(self) -> None:
        self._epoch += 1
        self._generations.clear()
        super().clear()


class Grouped(_Shared[V]):
    """A bounded LRU whose keys do not name their tenant (a slug, a credential's digest, a
    request's digest), with each tenant's keys remembered so that its notification drops them (a
    fair share each when the cache is full: ``_Shared``)."""

    def __init__(
        self, name: str, capacity: int, weigh: Any = None, share: float = FAIR_SHARE
    ) -> None:
        super().__init__(name, capacity, weigh, share)
        self._owners: dict[Hashable, int] = {}  # whose entry each key is

    def _owner(self, key: Hashable) -> int:
        return self._owners.pop(key)

    def _owns(self, tenant: int, key: Hashable) -> bool:
        return self._owners.get(key) == tenant

    def _claim(self, tenant: int, key: Hashable) -> None:
        self._owners[key] = tenant

    def keep(self, tenant_id: uuid.UUID, key: Hashable, value: V) -> None:
        self._keep(tenant_id.int, key, value)

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        self._forget(tenant_id.int)

    def clear(self) -> None:
        super().clear()
        self._owners.clear()
